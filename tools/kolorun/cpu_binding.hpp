// Which CPU each local rank is bound to (kolorun --bind-to), as mpirun binds ranks to cores by
// default when there are no more of them than cores. Unbound, two ranks on two cores are now and
// then put on the same core by the scheduler, which then leaves them there for milliseconds:
// every small collective became a ping-pong between two threads taking turns on one core (14-60
// us instead of 0.3; docs/PERFORMANCE.md), something Open MPI's bound ranks never meet.
#pragma once
#include <string>
#include <vector>

namespace kolo::launcher {

enum class BindMode { automatic, core, none };

// "core", "none" or "auto"; throws kolo::InvalidArgument naming --bind-to otherwise.
BindMode parse_bind_mode(const std::string& value);

// The CPUs this process may run on (sched_getaffinity), in increasing order.
std::vector<int> allowed_cpus();

// The CPU of each of `nproc` ranks started on this machine, or an empty list for no binding.
// automatic: one rank per CPU of `cpus` when there are at least as many CPUs as ranks and the
// ranks run here (not through --hosts); none otherwise. core: the same, but too few CPUs is an
// error (kolo::InvalidArgument), as mpirun refuses to bind more ranks than cores.
std::vector<int> plan_binding(BindMode mode, int nproc, bool ranks_run_here, const std::vector<int>& cpus);

}  // namespace kolo::launcher

// The timed loops, as templates over a backend's own call type, so that each backend's
// PreparedRun::time (backend.hpp) instantiates them with its concrete call and the per-call path
// is that call and nothing else: no virtual call, no allocation, no harness code per operation.
//
// Every loop runs right after the harness's barrier, and reads a clock (tens of nanoseconds a
// read: 33 ns on this project's VMs, as much as a tenth of a small collective) only where its
// mode needs one:
//   time_each_waited  the plain loop, `total` operations each issued and waited for, the clock
//                     read only around the whole loop, as Open MPI's and Gloo's peers time their
//                     blocking calls, and as kolo-perf runs -z 2 (compare.sh's) and -z 1 (with
//                     its barrier after each operation) without -I.
//   time_iterations   nccl-tests' modes (kolo-perf): `iters` iterations of `agg_iters` operations
//                     (-m), issued back to back (-z 0) or waited for (-z 1: and a barrier after
//                     each; -z 3: a barrier after each iteration, left out of the time), and with
//                     -I 1 the time of each iteration.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

#include "backend.hpp"

namespace kolo::bench {

using TimingClock = std::chrono::steady_clock;

// Seconds per operation of `total` calls of run_and_wait(). Never inlined: in a function of its
// own the loop keeps its counter in a register, where inlined into a large caller (GCC inlines a
// PreparedRun::time it can devirtualize into the harness's sweep) it was spilled to the stack, a
// load and a store more per operation. run_and_wait by value (a lambda holding a reference, or
// std::ref of a std::function): a copy in a register, where a reference to it was reloaded from
// memory on every operation.
template <class RunAndWait>
[[gnu::noinline]] double time_each_waited(RunAndWait run_and_wait, long total) {
  const auto start = TimingClock::now();
  for (long k = 0; k < total; ++k) run_and_wait();
  const std::chrono::duration<double> elapsed = TimingClock::now() - start;
  return elapsed.count() / static_cast<double>(total);
}

// Call, a backend's concrete type, passed by value (a few pointers, kept in registers where
// members of a referenced object were reloaded from memory around every call), its members
// called directly, never through a base class:
//   void run_and_wait();   issue one operation and wait for it
//   void issue();          issue one without waiting (-z 0), kept until forget_issued()
//   void wait_issued();    wait for every operation issued so far (they complete in issue order,
//                          so waiting in that order adds no delay)
//   void forget_issued();  drop the waited-for operations
//   void reserve(size_t);  room for that many issued operations, so that issue() never allocates
//   void barrier();        the library's barrier
// Seconds per operation measured on this rank: elapsed / (iters x agg_iters); with -z 3 only the
// time up to each iteration's barrier counts, as in nccl-tests. iteration_seconds (-I 1): also
// each iteration's time per operation, measured by waiting for each iteration before issuing the
// next (a CPU has no stream events to time them in flight).
template <class Call>
double time_iterations(Call call, const TimingRequest& t, std::vector<double>* iteration_seconds) {
  const int iters = t.iters;  // copies: the loop reads no memory that the calls could change
  const int agg_iters = t.agg_iters;
  const Blocking mode = t.mode;
  const bool per_iteration_clock = iteration_seconds != nullptr || mode == Blocking::wait_barrier_untimed;
  const long total = static_cast<long>(iters) * agg_iters;
  // The default of compare.sh (-z 2): each operation waited for and nothing else, in a loop as
  // plain as the peers'; -z 1 adds its barrier after each. The general loop below tests its
  // modes on every iteration (~20 instructions a call).
  if (mode == Blocking::wait && !per_iteration_clock) return time_each_waited([call] { call.run_and_wait(); }, total);
  if (mode == Blocking::wait_barrier && !per_iteration_clock) {
    return time_each_waited(
        [call] {
          call.run_and_wait();
          call.barrier();
        },
        total);
  }
  if (mode == Blocking::none) call.reserve(static_cast<size_t>(iters) * static_cast<size_t>(agg_iters));
  std::chrono::duration<double> untimed_excluded{0};  // -z 3: the operations only, barriers left out
  const auto start = TimingClock::now();
  for (int i = 0; i < iters; ++i) {
    const auto iteration_start = per_iteration_clock ? TimingClock::now() : TimingClock::time_point{};
    for (int a = 0; a < agg_iters; ++a) {
      if (mode == Blocking::none) {
        call.issue();
        continue;
      }
      // nccl-tests' startColl: -z 1, 2 and 3 wait for each operation, -z 1 adds a barrier.
      call.run_and_wait();
      if (mode == Blocking::wait_barrier) call.barrier();
    }
    if (iteration_seconds != nullptr) {
      call.wait_issued();
      call.forget_issued();
      const std::chrono::duration<double> took = TimingClock::now() - iteration_start;
      iteration_seconds->push_back(took.count() / agg_iters);
    }
    if (mode == Blocking::wait_barrier_untimed) {
      untimed_excluded += TimingClock::now() - iteration_start;
      call.barrier();
    }
  }
  call.wait_issued();
  const std::chrono::duration<double> elapsed = TimingClock::now() - start;
  call.forget_issued();  // after the clock: dropping the operations is no part of their time
  const double seconds = mode == Blocking::wait_barrier_untimed ? untimed_excluded.count() : elapsed.count();
  return seconds / (static_cast<double>(iters) * agg_iters);
}

}  // namespace kolo::bench

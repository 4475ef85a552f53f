#include "kolorun/cpu_binding.hpp"

#include <sched.h>

#include "kolo/error.hpp"

namespace kolo::launcher {

BindMode parse_bind_mode(const std::string& value) {
  if (value == "core") return BindMode::core;
  if (value == "none") return BindMode::none;
  if (value == "auto") return BindMode::automatic;
  throw InvalidArgument("--bind-to must be core, none or auto, not '" + value + "'");
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> plan_binding(BindMode mode, int nproc, bool ranks_run_here, const std::vector<int>& cpus) {
  if (mode == BindMode::none) return {};
  const bool fits = nproc <= static_cast<int>(cpus.size());
  if (mode == BindMode::core) {
    if (!ranks_run_here) throw InvalidArgument("--bind-to core binds ranks started on this machine; with --hosts, bind on each host");
    if (!fits)
      throw InvalidArgument("--bind-to core: " + std::to_string(nproc) + " ranks but kolorun may use " +
                            std::to_string(cpus.size()) + " CPUs (one rank per CPU; --bind-to none to share them)");
  }
  if (!ranks_run_here || !fits) return {};
  return std::vector<int>(cpus.begin(), cpus.begin() + nproc);
}

}  // namespace kolo::launcher

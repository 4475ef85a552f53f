#include "memory_report.hpp"

#include <sys/resource.h>

#include <cstdint>
#include <vector>

namespace kolo::train {

std::string memory_report(ProcessGroup& group, size_t optimizer_state_bytes) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const uint64_t mine[2] = {optimizer_state_bytes, static_cast<uint64_t>(usage.ru_maxrss)};  // ru_maxrss: KiB
  std::vector<uint64_t> all(2 * static_cast<size_t>(group.size()));
  group.allgather(Buffer(mine, 2), Buffer(all.data(), all.size()))->wait();
  std::string report;
  for (int r = 0; r < group.size(); ++r) {
    if (r > 0) report += '\n';
    report += "memory rank " + std::to_string(r) + " optimizer_state_bytes " + std::to_string(all[2 * size_t(r)]) +
              " peak_rss_kb " + std::to_string(all[2 * size_t(r) + 1]);
  }
  return report;
}

}  // namespace kolo::train

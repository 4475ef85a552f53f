#include "peer_report.hpp"

#include <cstdio>

namespace kolo::peers {

void print_preamble(const char* program, const std::string& library, const PeerOptions& o,
                    const std::vector<RankDescription>& ranks) {
  std::printf("# %s, %s (nccl-tests compatible output)\n", program, library.c_str());
  std::printf("# Collective test starting: %s\n", o.collective.c_str());
  const bool by_factor = o.step_factor > 1;
  std::printf(
      "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: 1 "
      "validation: %d graph: 0\n",
      o.min_bytes, o.max_bytes, by_factor ? o.step_factor : o.step_bytes, by_factor ? "factor" : "bytes",
      o.warmup_iters, o.iters, o.check ? 1 : 0);
  std::printf("#\n# Using devices\n");
  for (const RankDescription& r : ranks)
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s device cpu [%s]\n", r.rank, r.pid, r.host.c_str(), program);
  std::fflush(stdout);
}

void print_column_header() {
  std::printf("#\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
              "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type",
              "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "",
              "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void print_row_start(size_t size_bytes, size_t count, const char* type, const char* redop, int root) {
  std::printf("%12zu  %12zu  %8s  %6s  %6i", size_bytes, count, type, redop, root);
}

void print_measurement(double time_us, double algbw_gbs, double busbw_gbs, int64_t wrong) {
  // nccl-tests keeps the time column 7 wide by dropping decimals as the value grows.
  char time_text[32];
  if (time_us >= 10000.0) {
    std::snprintf(time_text, sizeof time_text, "%7.0f", time_us);
  } else if (time_us >= 100.0) {
    std::snprintf(time_text, sizeof time_text, "%7.1f", time_us);
  } else {
    std::snprintf(time_text, sizeof time_text, "%7.2f", time_us);
  }
  if (wrong < 0) {
    std::printf("  %7s  %6.2f  %6.2f  %5s", time_text, algbw_gbs, busbw_gbs, "N/A");
  } else {
    std::printf("  %7s  %6.2f  %6.2f  %5g", time_text, algbw_gbs, busbw_gbs, static_cast<double>(wrong));
  }
}

void print_row_end() {
  std::printf("\n");
  std::fflush(stdout);
}

void print_footer(int64_t total_wrong, double avg_busbw, const std::string& collective) {
  std::printf("# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(total_wrong),
              total_wrong != 0 ? "FAILED" : "OK");
  std::printf("# %-20s : %g \n", "Avg bus bandwidth", avg_busbw);
  std::printf("#\n");
  std::printf("# Collective test concluded: %s\n", collective.c_str());
  std::fflush(stdout);
}

}  // namespace kolo::peers

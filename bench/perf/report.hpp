// kolo-perf's output, in nccl-tests' exact layout so that scripts written for nccl-tests parse
// it: the preamble, the two-line column header, one row per size (out-of-place then in-place
// columns), and the "Out of bounds values" / "Avg bus bandwidth" footer. Only rank 0 prints.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "options.hpp"

namespace kolo::perf {

struct RankDescription {
  int rank;
  int pid;
  std::string host;
};

void print_preamble(const PerfOptions& o, const std::vector<RankDescription>& ranks);
void print_column_header();
// size: max(send, recv) bytes; count: the per-rank count passed to the collective.
void print_row_start(size_t size_bytes, size_t count, const char* type, const char* redop, int root);
// One column group; wrong < 0 means "not checked" (printed as N/A).
void print_measurement(double time_us, double algbw_gbs, double busbw_gbs, int64_t wrong);
void print_row_end();
void print_footer(int64_t total_wrong, double avg_busbw, const std::string& collective);

}  // namespace kolo::perf

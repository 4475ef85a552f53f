// The peers' output in nccl-tests' (and kolo-perf's) exact layout: preamble, two-line column
// header, one row per size (out-of-place then in-place), and the footer with "Avg bus bandwidth".
// Only rank 0 prints. compare.sh reads kolo-perf's rows and these with one parser.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "peer_options.hpp"

namespace kolo::peers {

struct RankDescription {
  int rank;
  int pid;
  std::string host;
};

// library: what runs the collectives ("Open MPI v4.1.4", "Gloo 0.5.0 tcp AllreduceRing").
void print_preamble(const char* program, const std::string& library, const PeerOptions& o,
                    const std::vector<RankDescription>& ranks);
void print_column_header();
void print_row_start(size_t size_bytes, size_t count, const char* type, const char* redop, int root);
void print_measurement(double time_us, double algbw_gbs, double busbw_gbs, int64_t wrong);  // wrong < 0: N/A
void print_row_end();
void print_footer(int64_t total_wrong, double avg_busbw, const std::string& collective);

}  // namespace kolo::peers

// The peer benchmarks' command line: kolo-perf's (nccl-tests') flags with the same letters and
// defaults, so compare.sh passes one argument list to kolo-perf, kolo-perf-mpi and kolo-perf-gloo.
#pragma once
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "peer_types.hpp"

namespace kolo::peers {

// A bad command line: main prints it with the usage text and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How the per-rank times of one measurement become the printed time (nccl-tests -a).
enum class TimeCombine { rank0 = 0, average = 1, minimum = 2, maximum = 3 };

struct PeerOptions {
  std::string collective;
  size_t min_bytes = 32 * 1024 * 1024;
  size_t max_bytes = 32 * 1024 * 1024;
  size_t step_bytes = 1024 * 1024;
  size_t step_factor = 1;  // > 1: multiply sizes by this; else add step_bytes
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  std::vector<ReduceKind> ops = {ReduceKind::sum};
  std::vector<ElementType> types = {ElementType::float32};
  int root = 0;
  TimeCombine combine = TimeCombine::average;
  std::chrono::milliseconds timeout{300000};  // -T: Gloo's per-operation timeout
  std::string algorithm;                      // --algo: the Gloo algorithm
  std::string store_dir;                      // --store-dir: Gloo's FileStore directory
  bool help = false;
};

// What one program accepts beyond the common flags.
struct ProgramTraits {
  const char* name;                    // "kolo-perf-mpi"
  std::vector<std::string> collectives;
  std::vector<std::string> algorithms;  // empty: --algo is refused
  bool has_store_dir = false;
  bool has_timeout = false;            // -T: only where the library bounds its waits
};

PeerOptions parse_options(int argc, char** argv, const ProgramTraits& traits);
// A byte count with an optional K/M/G suffix (powers of 1024), as nccl-tests' parsesize.
size_t parse_size(const std::string& text, const char* flag);
std::string usage_text(const ProgramTraits& traits);

}  // namespace kolo::peers

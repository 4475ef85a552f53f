// kolo-perf's command line: nccl-tests' flags (same letters, same defaults) plus kolo's own
// --algo, --transport and --timeout.
#pragma once
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "kolo/types.hpp"

namespace kolo::perf {

// A bad command line: main() prints it with the usage text and exits with kExitUsage.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How the per-rank times of one measurement are combined into the printed time (nccl-tests -a).
enum class TimeCombine { rank0 = 0, average = 1, minimum = 2, maximum = 3 };

struct PerfOptions {
  std::string collective;  // first positional argument, e.g. "allreduce"
  size_t min_bytes = 32 * 1024 * 1024;
  size_t max_bytes = 32 * 1024 * 1024;
  size_t step_bytes = 1024 * 1024;
  size_t step_factor = 1;  // > 1: multiply sizes by this; else add step_bytes
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  std::vector<ReduceOp> ops = {ReduceKind::sum};          // more than one with -o all
  std::vector<DataType> dtypes = {DataType::float32};     // more than one with -d all
  bool all_ops = false;    // -o all: skip the bitwise ops on floating types instead of failing
  bool all_dtypes = false;
  int root = 0;
  TimeCombine combine = TimeCombine::average;
  bool blocking = false;
  std::string algorithm;   // --algo: Options.algorithm of every measured collective
  std::string transport;   // --transport: GroupOptions.transport
  std::chrono::milliseconds timeout{0};  // -T/--timeout: GroupOptions.timeout (0: KOLO_TIMEOUT)
  bool help = false;
};

// Parses argv. Throws UsageError for an unknown flag, a missing or malformed value, or an
// unknown collective, type or operator.
PerfOptions parse_options(int argc, char** argv);

// Parses a byte count with an optional K/M/G suffix (powers of 1024, either case), like
// nccl-tests' parsesize. Throws UsageError.
size_t parse_size(const std::string& text, const char* flag);

std::string usage_text(const char* program);

// nccl-tests' names: "float", "half", "bfloat16", "double", "int8", ... and "mulsum" for premul_sum.
const char* nccl_dtype_name(DataType t);
const char* nccl_op_name(ReduceKind k);

}  // namespace kolo::perf

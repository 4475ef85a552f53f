// kolo-perf's command line: every nccl-tests flag (bench/common: same letters, long names and
// defaults, getopt_long, plus --json, --csv, --min-bw) and kolo's own --algo, --transport,
// --timeout and --inject-wrong.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common_options.hpp"
#include "kolo/types.hpp"
#include "sizes.hpp"
#include "usage_error.hpp"

namespace kolo::perf {

using bench::Blocking;
using bench::TimeCombine;
using bench::UsageError;
using bench::parse_size;

struct PerfOptions : bench::CommonOptions {
  std::vector<ReduceOp> ops = {ReduceKind::sum};          // -o, more than one with -o all
  std::vector<DataType> dtypes = {DataType::float32};     // -d, more than one with -d all
  bool all_ops = false;    // -o all: skip the bitwise ops on floating types instead of failing
  bool all_dtypes = false;
  std::string algorithm;   // --algo: Options.algorithm of every measured collective
  std::string transport;   // --transport: GroupOptions.transport
  std::chrono::milliseconds timeout{0};  // -T/--timeout: GroupOptions.timeout (0: KOLO_TIMEOUT)
  bool inject_wrong = false;  // --inject-wrong 1: spoil one checked element per check (tests exit 7)
};

// Parses argv. Throws UsageError for an unknown flag, a missing or malformed value, or an
// unknown collective, type or operator.
PerfOptions parse_options(int argc, char** argv);

std::string usage_text(const char* program);

// nccl-tests' names: "float", "half", "bfloat16", "double", "int8", ... and "mulsum" for premul_sum.
const char* nccl_dtype_name(DataType t);
const char* nccl_op_name(ReduceKind k);

}  // namespace kolo::perf

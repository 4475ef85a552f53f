// kolo-perf's command line: every nccl-tests flag (bench/common: same letters, long names and
// defaults, getopt_long, plus --json, --csv, --min-bw) and kolo's own --algo, --transport,
// --timeout and --inject-wrong (the harness's, bench/common/harness.hpp).
#pragma once
#include <chrono>
#include <string>

#include "harness.hpp"
#include "sizes.hpp"
#include "usage_error.hpp"

namespace kolo::perf {

using bench::Blocking;
using bench::TimeCombine;
using bench::UsageError;
using bench::parse_size;

// -d and -o (bench::SweepOptions: dtypes, ops) take every type and operator kolo has, by kolo's
// names and nccl-tests' (kolo::parse_dtype, kolo::parse_reduce; "mulsum" for premul_sum).
struct PerfOptions : bench::SweepOptions {
  std::string algorithm;   // --algo: Options.algorithm of every measured collective
  std::string transport;   // --transport: GroupOptions.transport
  std::chrono::milliseconds timeout{0};  // -T/--timeout: GroupOptions.timeout (0: KOLO_TIMEOUT)
};

// Parses argv. Throws UsageError for an unknown flag, a missing or malformed value, or an
// unknown collective, type or operator.
PerfOptions parse_options(int argc, char** argv);

std::string usage_text(const char* program);

}  // namespace kolo::perf

// The peer benchmarks' command line: bench/common's (nccl-tests' flags with the same letters and
// defaults, plus --json, --csv, --min-bw), so compare.sh passes one argument list to kolo-perf,
// kolo-perf-mpi and kolo-perf-gloo; plus each peer's own -T, --algo and --store-dir. -d and -o
// take the types and operators every peer library has natively: int8, uint8, int32, uint32,
// int64, uint64, float, double; sum, prod, min, max.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "harness.hpp"
#include "sizes.hpp"
#include "usage_error.hpp"

namespace kolo::peers {

using bench::kExitError;
using bench::kExitOk;
using bench::kExitTestFailure;
using bench::kExitUsage;
using bench::parse_size;
using bench::TimeCombine;
using bench::UsageError;

struct PeerOptions : bench::SweepOptions {
  std::chrono::milliseconds timeout{300000};  // -T: Gloo's per-operation timeout
  std::string algorithm;                      // --algo: the Gloo algorithm
  std::string store_dir;                      // --store-dir: Gloo's FileStore directory
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
std::string usage_text(const ProgramTraits& traits);

// What every peer's main does first: parses argv into `o`, and prints a bad command line (with
// the usage), --version or --help. Returns the exit status when the program is done, else -1.
int parse_command_line(int argc, char** argv, const ProgramTraits& traits, PeerOptions& o);

}  // namespace kolo::peers

// The peer benchmarks' command line: bench/common's (nccl-tests' flags with the same letters and
// defaults, plus --json, --csv, --min-bw), so compare.sh passes one argument list to kolo-perf,
// kolo-perf-mpi and kolo-perf-gloo; plus each peer's own -T, --algo and --store-dir.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common_options.hpp"
#include "peer_types.hpp"
#include "sizes.hpp"
#include "usage_error.hpp"

namespace kolo::peers {

using bench::parse_size;
using bench::TimeCombine;
using bench::UsageError;

struct PeerOptions : bench::CommonOptions {
  std::vector<ReduceKind> ops = {ReduceKind::sum};           // -o
  std::vector<ElementType> types = {ElementType::float32};   // -d
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

}  // namespace kolo::peers

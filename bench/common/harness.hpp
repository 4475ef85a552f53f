// The benchmark harness every program shares (kolo-perf with its kolo backend, kolo-perf-mpi and
// kolo-perf-gloo with theirs, backend.hpp): the sweep over every requested type x operator x
// size, out-of-place then in-place, each warmed up (before the out-of-place column), timed
// (timing_loop.hpp), combined across ranks (-a) and checked element by element (-c N), with
// nccl-tests' table on rank 0 and -J / --json / --csv (report.hpp). With a DeviceMemory
// (kolo-perf -g 1) the backend runs on device buffers and the values are filled and checked in
// host images copied to and from them (device_memory.hpp).
#pragma once
#include <string>
#include <vector>

#include "backend.hpp"
#include "common_options.hpp"
#include "device_memory.hpp"
#include "elements.hpp"

namespace kolo::bench {

// The command line as the harness needs it: nccl-tests' flags, and -d and -o turned into types
// and operators by each program (which accepts what its library has).
struct SweepOptions : CommonOptions {
  std::vector<ElementType> dtypes = {ElementType::float32};  // -d, more than one with -d all
  std::vector<RedOp> ops = {RedOp::sum};                     // -o, more than one with -o all
  bool all_dtypes = false;  // -d all / -o all: skip the bitwise operators on floating types
  bool all_ops = false;     // instead of failing
  bool inject_wrong = false;  // kolo-perf's --inject-wrong 1: spoil one checked element per check (exit 7)
  // What a program leaves out of nccl-tests' flags (the peers, whose notes on the "#" lines say
  // so): -N (one sweep however many are asked for) and -u (the buffers stay aligned).
  bool repeats_cycles = true;
  bool unaligns = true;
  // Whether the inputs are filled with small integers before each column's warm-up (the peers),
  // or the buffers keep what the last run left there (kolo-perf: zeros at first, then the
  // previous check's values). Each program keeps what it has always measured with: repeated
  // in-place reductions of small integers overflow float16 to infinity, which changes the time
  // of kolo's float16 kernels.
  bool fill_before_timing = false;
};

// Collective: every rank calls it with the same options. Checks the root against the group,
// describes the ranks (pid, host), prints the preamble and the table on rank 0 (device_tag names
// each rank's device, as "[kolo] algo auto transport tcp"), measures, writes -J / --json / --csv
// there and returns kExitOk or kExitTestFailure (7: wrong results or below the floor). Throws
// UsageError for a root outside the group or a bitwise operator asked for on a floating type.
// device (kolo-perf -g 1; nullptr: host memory): the buffers the backend runs on are device
// memory; the values are written and checked in host images copied to and from it, and each
// rank's GPU is named on its "Using devices" line and in the JSON files.
int run_benchmark(Backend& backend, const SweepOptions& o, const std::string& program, const std::string& device_tag,
                  DeviceMemory* device = nullptr);

}  // namespace kolo::bench

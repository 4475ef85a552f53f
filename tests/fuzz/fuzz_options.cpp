// libFuzzer target: the command-line parsers of kolorun (launcher::parse_launch_options) and
// kolo-perf (perf::parse_options) fed arbitrary argument vectors. Byte 0 picks the parser; the
// rest, split at NUL bytes, are the arguments.
// Invariants, beyond no crash and no sanitizer report: a parser either returns or throws its
// documented usage error (kolo::InvalidArgument, bench::UsageError), nothing else; and what it
// returns is usable: kolorun has 1..kMaxProcesses ranks, a program, a positive timeout and a
// master address; kolo-perf a size range that sweeps (min <= max, and a step that advances).
// kolo-perf's parser is getopt_long (bench/common); --version is reported in the options, never
// acted on inside the parser, so no input can make it exit.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/perf/options.hpp"
#include "kolo/error.hpp"
#include "kolorun/options.hpp"

using namespace kolo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<std::string> args(1);
  for (size_t i = 1; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) args.emplace_back();
    else args.back() += static_cast<char>(data[i]);
  }
  if (data[0] & 1) {
    try {
      const launcher::LaunchOptions o = launcher::parse_launch_options(args);
      if (o.show_help || o.show_version) return 0;
      if (o.nproc < 1 || o.nproc > launcher::kMaxProcesses || o.program.empty() || o.master_addr.empty()) std::abort();
      if (o.timeout_seconds && !(*o.timeout_seconds > 0)) std::abort();
    } catch (const InvalidArgument&) {
    }
    return 0;
  }
  std::vector<char*> argv{const_cast<char*>("kolo-perf")};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  try {
    const perf::PerfOptions o = perf::parse_options(static_cast<int>(argv.size() - 1), argv.data());
    if (o.help || o.version) return 0;
    if (o.min_bytes > o.max_bytes) std::abort();
    if (o.min_bytes < o.max_bytes && o.step_factor <= 1 && o.step_bytes == 0) std::abort();  // would never end
    if (o.ops.empty() || o.dtypes.empty()) std::abort();
  } catch (const bench::UsageError&) {
  }
  return 0;
}

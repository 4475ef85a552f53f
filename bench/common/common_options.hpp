// The command line every benchmark program shares: nccl-tests' common flags (same letters,
// long names and defaults) plus --json, --csv and --min-bw. Each program adds its own flags
// (kolo-perf: --algo, --transport, -T; the peers: --algo, --store-dir, -T) through ExtraFlags,
// and turns the -d / -o text into its own types.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace kolo::bench {

// How the per-rank times of one measurement become the printed time (nccl-tests -a).
enum class TimeCombine { rank0 = 0, average = 1, minimum = 2, maximum = 3 };

struct CommonOptions {
  std::string collective;  // first positional argument, canonical name ("allreduce")
  size_t min_bytes = 32 * 1024 * 1024;
  size_t max_bytes = 32 * 1024 * 1024;
  size_t step_bytes = 1024 * 1024;
  size_t step_factor = 1;  // > 1: multiply sizes by this; else add step_bytes
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  std::string dtype_text = "float";  // -d as typed; each program parses it
  std::string op_text = "sum";       // -o as typed
  int root = 0;
  TimeCombine combine = TimeCombine::average;
  bool blocking = false;             // -z 1: wait for each operation before issuing the next
  std::string json_path;             // --json FILE: every row as JSON (rank 0 writes it)
  std::string csv_path;              // --csv FILE: every row as CSV
  double min_bw = 0;                 // --min-bw GB/s (or KOLO_PERF_MIN_BW); 0: no floor
  bool help = false;
};

// A program's own value-taking flag: short spelling ("-T", or "" for none) and long spelling.
struct ExtraFlag {
  const char* short_name;
  const char* long_name;
};
// Called with the flag's canonical spelling (its short name when it has one) and the value.
using ExtraFlagHandler = std::function<void(const std::string& flag, const std::string& value)>;

// Parses argv into `o`. Accepts "--flag=value" for long flags. Throws UsageError for an unknown
// flag, a missing or malformed value, a missing or extra positional argument, or sizes that
// cannot sweep. The collective name is only canonicalized: the program validates it.
// KOLO_PERF_MIN_BW supplies the floor when --min-bw is absent.
void parse_common(int argc, char** argv, CommonOptions& o, const std::vector<ExtraFlag>& extra,
                  const ExtraFlagHandler& handle_extra);

// The usage lines of the common flags (program-specific lines go after them).
std::string common_usage_lines(const std::string& dtype_help, const std::string& op_help);

}  // namespace kolo::bench

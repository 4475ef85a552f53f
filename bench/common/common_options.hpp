// The command line every benchmark program shares: every flag of nccl-tests (same letters, long
// names, defaults and meaning, parsed with getopt_long as nccl-tests does) plus --json, --csv and
// --min-bw. Flags that mean nothing on a CPU (-G, -R, -y, ...) are accepted and leave a note
// that the table's preamble prints on a "#" line (kolo-perf, which has device memory, takes -g
// and -G itself: own_gpu_flags). Each program adds its own flags (kolo-perf:
// --algo, --transport, -T; the peers: --algo, --store-dir, -T) through ExtraFlags, and turns the
// -d / -o text into its own types.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace kolo::bench {

// How the per-rank times of one measurement become the printed time (nccl-tests -a).
enum class TimeCombine { rank0 = 0, average = 1, minimum = 2, maximum = 3 };

// nccl-tests -z: 0 issue back to back; 1 wait and barrier after each operation; 2 wait after
// each, no barrier; 3 wait and barrier after each, the barrier left out of the time.
enum class Blocking { none = 0, wait_barrier = 1, wait = 2, wait_barrier_untimed = 3 };

struct CommonOptions {
  std::string collective;  // first positional argument (or the program name), canonical ("allreduce")
  size_t min_bytes = 32 * 1024 * 1024;
  size_t max_bytes = 32 * 1024 * 1024;
  size_t step_bytes = 1024 * 1024;
  size_t step_factor = 1;  // > 1: multiply sizes by this; else add step_bytes
  int iters = 20;
  int warmup_iters = 1;    // nccl-tests' default
  int agg_iters = 1;       // -m: operations issued per timed iteration
  int run_cycles = 1;      // -N: sweeps run and printed (0: until killed)
  int check_iters = 1;     // -c: check runs per size (0: no check); stops at the first wrong one
  bool check = true;       // check_iters > 0
  std::string dtype_text = "float";  // -d as typed; each program parses it
  std::string op_text = "sum";       // -o as typed
  int root = 0;
  TimeCombine combine = TimeCombine::average;
  Blocking blocking_mode = Blocking::none;  // -z
  bool blocking = false;                    // -z != 0
  bool report_cputime = false;     // -C 1: the time columns are named "cputime" (they are anyway)
  bool report_timestamps = false;  // -S 1: a timestamp after each row
  int unalign = 0;                 // -u: buffers start this many elements past their alignment
  bool per_iter_timing = false;    // -I 1: time every iteration (i_min, i_max, i_p99, i_cv% columns)
  int per_iter_skip = 0;           // -K: leading iterations left out of those statistics
  std::string output_file;         // -J FILE: nccl-tests' JSON document (written when it ends in .json)
  std::string json_path;           // --json FILE: kolo's JSON rows (rank 0 writes it)
  std::string csv_path;            // --csv FILE: every row as CSV
  double min_bw = 0;               // --min-bw GB/s, NCCL_TESTS_MIN_BW or KOLO_PERF_MIN_BW; 0: no floor
  // Set by a program that measures device memory (kolo-perf) before parsing: -g and -G are then
  // read into gpus and cuda_graph, for the program to act on, instead of being noted.
  bool own_gpu_flags = false;
  int gpus = 0;        // -g (own_gpu_flags): GPUs per process; 0 (kolo's default): host memory
  int cuda_graph = 0;  // -G (own_gpu_flags): CUDA graph launches per iteration
  bool help = false;
  bool version = false;            // --version: print version_line() and exit 0 (the program does)
  std::vector<std::string> notes;  // why an accepted flag changes nothing here (printed as "# ...")
  std::vector<std::string> args;   // argv as given, for -J's "args"
  std::string program;             // argv[0]'s base name, for "# Collective test starting:"
};

// A program's own value-taking flag: short spelling ("-T", or "" for none) and long spelling.
struct ExtraFlag {
  const char* short_name;
  const char* long_name;
};
// Called with the flag's canonical spelling (its short name when it has one) and the value.
using ExtraFlagHandler = std::function<void(const std::string& flag, const std::string& value)>;

// Parses argv into `o` with getopt_long: "-b8", "-b 8", "--minbytes=8", "--minbytes 8", options
// before or after the collective. Throws UsageError for an unknown flag, a missing or malformed
// value, a missing or extra positional argument, or sizes that cannot sweep. The collective is
// the positional argument, or, when argv[0] is one of nccl-tests' program names
// (all_reduce_perf, ...), that program's collective; it is only canonicalized: the program
// validates it. The floor comes from --min-bw, else NCCL_TESTS_MIN_BW, else KOLO_PERF_MIN_BW.
void parse_common(int argc, char** argv, CommonOptions& o, const std::vector<ExtraFlag>& extra,
                  const ExtraFlagHandler& handle_extra);

// The collective of one of nccl-tests' program names ("all_reduce_perf" -> "allreduce"), or ""
// for any other name. `program` may be a path.
std::string collective_of_program(const std::string& program);

// nccl-tests' program name for a canonical collective ("allreduce" -> "all_reduce_perf").
std::string program_of_collective(const std::string& collective);

// "PROGRAM (kolo) VERSION", what --version prints.
std::string version_line(const std::string& program);

// The usage lines of the common flags (program-specific lines go after them).
// own_gpu_flags: leave -g and -G out of the GPU flags that have no effect (the program's own).
std::string common_usage_lines(const std::string& dtype_help, const std::string& op_help, bool own_gpu_flags = false);

}  // namespace kolo::bench

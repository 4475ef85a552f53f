#include "common_options.hpp"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "collective_specs.hpp"
#include "sizes.hpp"
#include "usage_error.hpp"

namespace kolo::bench {
namespace {

constexpr long long kIntMax = std::numeric_limits<int>::max();

// getopt_long codes of the long-only flags (past every character a short flag can use).
enum LongOnly { kJson = 256, kCsv, kMinBw, kVersion, kFirstExtra = 512 };

// nccl-tests' table (src/common.cu): every flag takes a value but -h.
const option kNcclTestsFlags[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"help", no_argument, nullptr, 'h'},
    // kolo's own, shared by every benchmark program.
    {"json", required_argument, nullptr, kJson},
    {"csv", required_argument, nullptr, kCsv},
    {"min-bw", required_argument, nullptr, kMinBw},
    {"version", no_argument, nullptr, kVersion},
};

struct ProgramName {
  const char* program;
  const char* collective;
};
constexpr ProgramName kProgramNames[] = {
    {"all_reduce_perf", "allreduce"},  {"all_gather_perf", "allgather"}, {"broadcast_perf", "broadcast"},
    {"reduce_perf", "reduce"},         {"reduce_scatter_perf", "reducescatter"}, {"alltoall_perf", "alltoall"},
    {"scatter_perf", "scatter"},       {"gather_perf", "gather"},       {"sendrecv_perf", "sendrecv"},
};

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int to_int(const std::string& value, const std::string& flag, long long lo, long long hi = kIntMax) {
  return static_cast<int>(parse_integer(value, flag, lo, hi));
}

// A flag nccl-tests has for GPUs: accepted with its range checked, and a note when its value
// would change what nccl-tests does.
void gpu_only(CommonOptions& o, const std::string& flag, const std::string& value, long long lo, long long hi,
              long long inert, const std::string& why) {
  if (parse_integer(value, flag, lo, hi) != inert) o.notes.push_back(flag + " " + value + ": " + why);
}

void apply_common(CommonOptions& o, int code, const std::string& flag, const std::string& value) {
  switch (code) {
    case 't': gpu_only(o, flag, value, 1, 1024, 1, "one rank per process; start more ranks with the launcher (kolorun -n)"); break;
    case 'g':
      if (o.own_gpu_flags) {
        o.gpus = to_int(value, flag, 0, 1024);
      } else {
        gpu_only(o, flag, value, 1, 1024, 1, "no GPUs: one rank per process; start more ranks with the launcher (kolorun -n)");
      }
      break;
    case 'b': o.min_bytes = parse_size(value, "-b"); break;
    case 'e': o.max_bytes = parse_size(value, "-e"); break;
    case 'i': o.step_bytes = parse_size(value, "-i"); break;
    case 'f': o.step_factor = static_cast<size_t>(parse_integer(value, flag, 1, 1 << 20)); break;
    case 'n': o.iters = to_int(value, flag, 1); break;
    case 'm': o.agg_iters = to_int(value, flag, 1); break;
    case 'w': o.warmup_iters = to_int(value, flag, 0); break;
    case 'N': o.run_cycles = to_int(value, flag, 0); break;
    case 'p': gpu_only(o, flag, value, 0, 1, 0, "one rank per process, so nothing to initialize in parallel"); break;
    case 'c':
      o.check_iters = to_int(value, flag, 0);
      o.check = o.check_iters > 0;
      break;
    case 'o': o.op_text = value; break;
    case 'd': o.dtype_text = value; break;
    case 'r': o.root = to_int(value, flag, 0); break;
    case 'z':
      o.blocking_mode = static_cast<Blocking>(to_int(value, flag, 0, 3));
      o.blocking = o.blocking_mode != Blocking::none;
      break;
    case 'y': gpu_only(o, flag, value, 0, 1, 0, "no CUDA streams on a CPU"); break;
    case 'G':
      if (o.own_gpu_flags) {
        o.cuda_graph = to_int(value, flag, 0);
      } else {
        gpu_only(o, flag, value, 0, kIntMax, 0, "no CUDA graphs on a CPU: every operation is issued on its own");
      }
      break;
    case 'C': o.report_cputime = to_int(value, flag, 0, 1) != 0; break;
    case 'S': o.report_timestamps = to_int(value, flag, 0, 1) != 0; break;
    case 'J':
      if (value.empty()) throw UsageError("-J: empty file name");
      o.output_file = value;
      break;
    case 'a': o.combine = static_cast<TimeCombine>(to_int(value, flag, 0, 3)); break;
    case 'R': gpu_only(o, flag, value, 0, 2, 0, "kolo registers no buffers: host memory needs none"); break;
    case 'x': gpu_only(o, flag, value, 0, 2, -1, "no CTAs on a CPU"); break;
    case 'D': gpu_only(o, flag, value, 0, kIntMax, 0, "no device implementations on a CPU"); break;
    case 'V': gpu_only(o, flag, value, 1, 128, 16, "no CTAs on a CPU"); break;
    case 'M': gpu_only(o, flag, value, 0, 1, 0, "no GPU memory to report"); break;
    case 'u': o.unalign = to_int(value, flag, 0, 4096); break;
    case 'I': o.per_iter_timing = to_int(value, flag, 0, 1) != 0; break;
    case 'K': o.per_iter_skip = to_int(value, flag, 0); break;
    case kJson:
      if (value.empty()) throw UsageError("--json: empty file name");
      o.json_path = value;
      break;
    case kCsv:
      if (value.empty()) throw UsageError("--csv: empty file name");
      o.csv_path = value;
      break;
    case kMinBw: o.min_bw = parse_non_negative(value, "--min-bw"); break;
    default: break;
  }
}

// The spelling to name a flag by in messages: "-b" or "--json".
std::string spelling(int code, const std::vector<option>& table) {
  if (code > 0 && code < 256) return std::string("-") + static_cast<char>(code);
  for (const option& opt : table) {
    if (opt.name != nullptr && opt.val == code) return std::string("--") + opt.name;
  }
  return "?";
}

}  // namespace

std::string collective_of_program(const std::string& program) {
  const std::string name = base_name(program);
  for (const ProgramName& p : kProgramNames) {
    if (name == p.program) return p.collective;
  }
  return "";
}

std::string program_of_collective(const std::string& collective) {
  for (const ProgramName& p : kProgramNames) {
    if (collective == p.collective) return p.program;
  }
  return collective;
}

void parse_common(int argc, char** argv, CommonOptions& o, const std::vector<ExtraFlag>& extra,
                  const ExtraFlagHandler& handle_extra) {
  o.program = argc > 0 ? base_name(argv[0]) : "";
  o.args.assign(argv, argv + argc);
  // ':' first: a missing value comes back as ':' instead of '?', so the message can say which.
  std::string short_flags = ":h";
  std::vector<option> table(std::begin(kNcclTestsFlags), std::end(kNcclTestsFlags));
  for (const option& opt : table) {
    if (opt.val < 256 && opt.val != 'h') short_flags += std::string(1, static_cast<char>(opt.val)) + ":";
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    const bool has_short = extra[i].short_name[0] != '\0';
    const int code = has_short ? extra[i].short_name[1] : kFirstExtra + static_cast<int>(i);
    if (has_short) short_flags += std::string(1, static_cast<char>(code)) + ":";
    table.push_back({extra[i].long_name + 2, required_argument, nullptr, code});
  }
  table.push_back({nullptr, 0, nullptr, 0});

  bool min_bw_given = false;
  opterr = 0;  // our messages, not getopt's
  optind = 0;  // 0: a full restart of GNU getopt, so parse_common can run more than once
  for (;;) {
    const int code = getopt_long(argc, argv, short_flags.c_str(), table.data(), nullptr);
    if (code == -1) break;
    if (code == '?') {
      const std::string arg = optopt != 0 ? std::string("-") + static_cast<char>(optopt) : argv[optind - 1];
      throw UsageError("unknown option '" + arg.substr(0, arg.find('=')) + "'");
    }
    if (code == ':') {
      // A long flag names itself as typed; getopt reports only the short letter of its code.
      const std::string typed = argv[optind - 1];
      const std::string arg = typed.rfind("--", 0) == 0 || optopt == 0 ? typed : spelling(optopt, table);
      throw UsageError("option '" + arg + "' needs a value");
    }
    if (code == 'h') {
      o.help = true;
      continue;
    }
    if (code == kVersion) {  // reported, not acted on here: a parser that exits cannot be fuzzed
      o.version = true;
      continue;
    }
    const std::string value = optarg != nullptr ? optarg : "";
    const ExtraFlag* own = nullptr;
    for (size_t i = 0; i < extra.size(); ++i) {
      const bool has_short = extra[i].short_name[0] != '\0';
      if ((has_short && code == extra[i].short_name[1]) || (!has_short && code == kFirstExtra + static_cast<int>(i)))
        own = &extra[i];
    }
    if (own != nullptr) {
      handle_extra(own->short_name[0] != '\0' ? own->short_name : own->long_name, value);
    } else {
      apply_common(o, code, spelling(code, table), value);
      if (code == kMinBw) min_bw_given = true;
    }
  }
  if (!min_bw_given) {
    // nccl-tests' NCCL_TESTS_MIN_BW gates a CI run without changing the command; kolo's
    // KOLO_PERF_MIN_BW does the same where both tools run.
    for (const char* name : {"NCCL_TESTS_MIN_BW", "KOLO_PERF_MIN_BW"}) {
      const char* env = std::getenv(name);
      if (env != nullptr && *env != '\0') {
        o.min_bw = parse_non_negative(env, name);
        break;
      }
    }
  }
  // nccl-tests' own corrections, said the same way (it prints them to stderr and goes on).
  if (o.per_iter_skip >= o.iters) {
    o.notes.push_back("per-iteration skip (-K) must be between 0 and " + std::to_string(o.iters - 1) + ". Disabling.");
    o.per_iter_skip = 0;
  }
  if (o.per_iter_skip != 0 && !o.per_iter_timing) {
    o.notes.push_back("per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.");
    o.per_iter_skip = 0;
  }
  if (o.help || o.version) return;
  std::vector<std::string> positional(argv + optind, argv + argc);
  const std::string implied = collective_of_program(o.program);
  if (!implied.empty()) {
    if (!positional.empty() && canonical_collective(positional[0]) != implied)
      throw UsageError("unexpected argument '" + positional[0] + "' (" + o.program + " measures " + implied + ")");
    if (positional.size() > 1) throw UsageError("unexpected argument '" + positional[1] + "'");
    o.collective = implied;
  } else {
    if (positional.empty()) throw UsageError("missing the collective to measure (" + collective_names() + ")");
    if (positional.size() > 1) throw UsageError("unexpected argument '" + positional[1] + "'");
    o.collective = canonical_collective(positional[0]);
  }
  if (o.max_bytes < o.min_bytes)
    throw UsageError("-e (" + std::to_string(o.max_bytes) + ") is smaller than -b (" + std::to_string(o.min_bytes) + ")");
  if (o.step_factor <= 1 && o.step_bytes == 0) throw UsageError("-i 0 with no -f would never reach -e");
}

std::string version_line(const std::string& program) { return base_name(program) + " (kolo) " + KOLO_VERSION; }

std::string common_usage_lines(const std::string& dtype_help, const std::string& op_help, bool own_gpu_flags) {
  // A program with device memory (kolo-perf) describes -g and -G itself.
  const std::string gpu_flags =
      own_gpu_flags ? "  -t, --nthreads, -p, --parallel_init, -y, --stream_null,\n"
                    : "  -t, --nthreads, -g, --ngpus, -p, --parallel_init, -y, --stream_null, -G, --cudagraph,\n";
  const std::string gpu_effect =
      own_gpu_flags ? "                            nccl-tests' GPU flags: accepted, noted on a '#' line, no effect\n"
                    : "                            nccl-tests' GPU flags: accepted, noted on a '#' line, no effect:\n"
                      "                            buffers are host memory, one rank per process (-g 2 still runs one\n"
                      "                            rank; start ranks with the launcher: kolorun -n 2)\n";
  return "  -b, --minbytes N          smallest size in bytes (K/M/G suffixes, fractions: 1.5K; default 32M)\n"
         "  -e, --maxbytes N          largest size in bytes (default 32M)\n"
         "  -i, --stepbytes N         add N bytes per step when -f is not given (default 1M)\n"
         "  -f, --stepfactor F        multiply the size by F per step\n"
         "  -n, --iters N             timed iterations per size (default 20)\n"
         "  -m, --agg_iters N         operations issued per timed iteration (default 1)\n"
         "  -w, --warmup_iters N      untimed iterations before each size (default 1)\n"
         "  -N, --run_cycles N        run and print the sweep N times (0: until killed; default 1)\n"
         "  -c, --check N             check runs per size, every element (0: none; default 1)\n"
         "  -o, --op OP               " + op_help + "\n" +
         "  -d, --datatype T          " + dtype_help + "\n" +
         "  -r, --root R              root rank of the rooted collectives (default 0)\n"
         "  -z, --blocking 0-3        0 back to back, 1 wait + barrier after each operation, 2 wait only,\n"
         "                            3 wait + barrier, barrier not timed (default 0)\n"
         "  -a, --average 0-3         time printed: 0 rank 0's, 1 average, 2 minimum, 3 maximum over ranks (default 1)\n"
         "  -C, --report_cputime 0|1  name the time columns \"cputime\" (kolo's times are CPU times anyway)\n"
         "  -S, --report_timestamps 0|1  print a timestamp after each row\n"
         "  -u, --unalign N           start the buffers N elements past their alignment (default 0)\n"
         "  -I, --per_iter_timing 0|1 time every iteration too (waits for each; i_min i_max i_p99 i_cv%)\n"
         "  -K, --per_iter_skip N     leave the first N iterations out of the -I statistics\n"
         "  -J, --output_file FILE    write nccl-tests' JSON document (FILE must end in .json; rank 0)\n"
         + gpu_flags +
         "  -R, --local_register, -x, --cta_policy, -D, --device_implementation,\n"
         "  -V, --device_cta_count, -M, --memory\n"
         + gpu_effect +
         "      --json FILE           also write every row as kolo's JSON (rank 0)\n"
         "      --csv FILE            also write every row as CSV (rank 0)\n"
         "      --min-bw GBS          exit 7 when the average bus bandwidth is below 0.9 x GBS GB/s\n"
         "                            (default: $NCCL_TESTS_MIN_BW, else $KOLO_PERF_MIN_BW)\n";
}

}  // namespace kolo::bench

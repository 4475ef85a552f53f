#include "common_options.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "collective_specs.hpp"
#include "sizes.hpp"
#include "usage_error.hpp"

namespace kolo::bench {
namespace {

constexpr ExtraFlag kCommonFlags[] = {
    {"-b", "--minbytes"}, {"-e", "--maxbytes"},     {"-i", "--stepbytes"}, {"-f", "--stepfactor"},
    {"-n", "--iters"},    {"-w", "--warmup_iters"}, {"-c", "--check"},     {"-o", "--op"},
    {"-d", "--datatype"}, {"-r", "--root"},         {"-a", "--average"},   {"-z", "--blocking"},
    {"", "--json"},       {"", "--csv"},            {"", "--min-bw"},
};

bool matches(const ExtraFlag& f, const std::string& arg) {
  return (f.short_name[0] != '\0' && arg == f.short_name) || arg == f.long_name;
}
std::string canonical(const ExtraFlag& f) { return f.short_name[0] != '\0' ? f.short_name : f.long_name; }

void apply_common(CommonOptions& o, const std::string& flag, const std::string& value) {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  if (flag == "-b") {
    o.min_bytes = parse_size(value, "-b");
  } else if (flag == "-e") {
    o.max_bytes = parse_size(value, "-e");
  } else if (flag == "-i") {
    o.step_bytes = parse_size(value, "-i");
  } else if (flag == "-f") {
    o.step_factor = static_cast<size_t>(parse_integer(value, flag, 1, 1 << 20));
  } else if (flag == "-n") {
    o.iters = static_cast<int>(parse_integer(value, flag, 1, kIntMax));
  } else if (flag == "-w") {
    o.warmup_iters = static_cast<int>(parse_integer(value, flag, 0, kIntMax));
  } else if (flag == "-c") {
    o.check = parse_integer(value, flag, 0, kIntMax) != 0;
  } else if (flag == "-o") {
    o.op_text = value;
  } else if (flag == "-d") {
    o.dtype_text = value;
  } else if (flag == "-r") {
    o.root = static_cast<int>(parse_integer(value, flag, 0, kIntMax));
  } else if (flag == "-a") {
    o.combine = static_cast<TimeCombine>(parse_integer(value, flag, 0, 3));
  } else if (flag == "-z") {
    o.blocking = parse_integer(value, flag, 0, 1) != 0;
  } else if (flag == "--json") {
    if (value.empty()) throw UsageError("--json: empty file name");
    o.json_path = value;
  } else if (flag == "--csv") {
    if (value.empty()) throw UsageError("--csv: empty file name");
    o.csv_path = value;
  } else if (flag == "--min-bw") {
    o.min_bw = parse_non_negative(value, "--min-bw");
  }
}

}  // namespace

void parse_common(int argc, char** argv, CommonOptions& o, const std::vector<ExtraFlag>& extra,
                  const ExtraFlagHandler& handle_extra) {
  std::vector<std::string> positional;
  bool min_bw_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg == "--version") {
      const char* slash = std::strrchr(argv[0], '/');
      std::printf("%s (kolo) %s\n", slash ? slash + 1 : argv[0], KOLO_VERSION);
      std::exit(0);
    }
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) {
      positional.push_back(arg);
      continue;
    }
    std::string value;
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      inline_value = true;
    }
    const ExtraFlag* common = nullptr;
    for (const ExtraFlag& f : kCommonFlags) {
      if (matches(f, arg)) common = &f;
    }
    const ExtraFlag* own = nullptr;
    for (const ExtraFlag& f : extra) {
      if (matches(f, arg)) own = &f;
    }
    if (common == nullptr && own == nullptr) throw UsageError("unknown option '" + arg + "'");
    if (!inline_value) {
      if (i + 1 >= argc) throw UsageError("option '" + arg + "' needs a value");
      value = argv[++i];
    }
    if (common != nullptr) {
      apply_common(o, canonical(*common), value);
      if (canonical(*common) == "--min-bw") min_bw_given = true;
    } else {
      handle_extra(canonical(*own), value);
    }
  }
  if (!min_bw_given) {
    // nccl-tests reads NCCL_TESTS_MIN_BW the same way: a CI gate without changing the command.
    const char* env = std::getenv("KOLO_PERF_MIN_BW");
    if (env != nullptr && *env != '\0') o.min_bw = parse_non_negative(env, "KOLO_PERF_MIN_BW");
  }
  if (o.help) return;
  if (positional.empty()) throw UsageError("missing the collective to measure (" + collective_names() + ")");
  if (positional.size() > 1) throw UsageError("unexpected argument '" + positional[1] + "'");
  o.collective = canonical_collective(positional[0]);
  if (o.max_bytes < o.min_bytes)
    throw UsageError("-e (" + std::to_string(o.max_bytes) + ") is smaller than -b (" + std::to_string(o.min_bytes) + ")");
  if (o.step_factor <= 1 && o.step_bytes == 0) throw UsageError("-i 0 with no -f would never reach -e");
}

std::string common_usage_lines(const std::string& dtype_help, const std::string& op_help) {
  return "  -b, --minbytes N      smallest size in bytes (K/M/G suffixes; default 32M)\n"
         "  -e, --maxbytes N      largest size in bytes (default 32M)\n"
         "  -i, --stepbytes N     add N bytes per step when -f is not given (default 1M)\n"
         "  -f, --stepfactor F    multiply the size by F per step\n"
         "  -n, --iters N         timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N  untimed iterations before each size (default 5)\n"
         "  -c, --check 0|1       check every result element (default 1)\n"
         "  -o, --op OP           " + op_help + "\n" +
         "  -d, --datatype T      " + dtype_help + "\n" +
         "  -r, --root R          root rank of the rooted collectives (default 0)\n"
         "  -a, --average 0-3     time printed: 0 rank 0's, 1 average, 2 minimum, 3 maximum over ranks (default 1)\n"
         "  -z, --blocking 0|1    wait for each operation before issuing the next (default 0)\n"
         "      --json FILE       also write every row as JSON (rank 0)\n"
         "      --csv FILE        also write every row as CSV (rank 0)\n"
         "      --min-bw GBS      fail (exit 4) when the average bus bandwidth is below GBS GB/s\n"
         "                        (default: $KOLO_PERF_MIN_BW, like nccl-tests' NCCL_TESTS_MIN_BW)\n";
}

}  // namespace kolo::bench

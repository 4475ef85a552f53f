#include "options.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "collectives.hpp"
#include "values.hpp"
#include "kolo/error.hpp"

namespace kolo::perf {
namespace {

// Every flag that takes a value, by its short and long spelling (nccl-tests' long names).
struct FlagSpec {
  const char* short_name;  // "-b"
  const char* long_name;   // "--minbytes"
};

constexpr FlagSpec kValueFlags[] = {
    {"-b", "--minbytes"}, {"-e", "--maxbytes"},     {"-i", "--stepbytes"}, {"-f", "--stepfactor"},
    {"-n", "--iters"},    {"-w", "--warmup_iters"}, {"-c", "--check"},     {"-o", "--op"},
    {"-d", "--datatype"}, {"-r", "--root"},         {"-a", "--average"},   {"-z", "--blocking"},
    {"-T", "--timeout"},  {nullptr, "--algo"},      {nullptr, "--transport"},
};

long long parse_integer(const std::string& text, const char* flag, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError(std::string(flag) + ": '" + text + "' is not an integer");
  if (v < lo || v > hi)
    throw UsageError(std::string(flag) + ": " + text + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

std::vector<ReduceOp> parse_ops(const std::string& text) {
  if (text == "all") {
    std::vector<ReduceOp> ops;
    for (int k = 0; k < kNumReduceKinds; ++k) ops.push_back(op_for(static_cast<ReduceKind>(k)));
    return ops;
  }
  // nccl-tests prints and accepts "mulsum" for the pre-multiplied sum.
  const std::string name = text == "mulsum" ? "premul_sum" : text;
  try {
    return {op_for(parse_reduce(name))};
  } catch (const kolo::InvalidArgument& e) {
    throw UsageError(std::string("-o: ") + e.what() + " or all");
  }
}

std::vector<DataType> parse_dtypes(const std::string& text) {
  if (text == "all") {
    std::vector<DataType> types;
    for (int t = 0; t < kNumDataTypes; ++t) types.push_back(static_cast<DataType>(t));
    return types;
  }
  try {
    return {parse_dtype(text)};
  } catch (const kolo::InvalidArgument& e) {
    throw UsageError(std::string("-d: ") + e.what() + " or all");
  }
}

void apply(PerfOptions& o, const std::string& flag, const std::string& value) {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  if (flag == "-b" || flag == "--minbytes") {
    o.min_bytes = parse_size(value, "-b");
  } else if (flag == "-e" || flag == "--maxbytes") {
    o.max_bytes = parse_size(value, "-e");
  } else if (flag == "-i" || flag == "--stepbytes") {
    o.step_bytes = parse_size(value, "-i");
  } else if (flag == "-f" || flag == "--stepfactor") {
    o.step_factor = static_cast<size_t>(parse_integer(value, "-f", 1, 1 << 20));
  } else if (flag == "-n" || flag == "--iters") {
    o.iters = static_cast<int>(parse_integer(value, "-n", 1, kIntMax));
  } else if (flag == "-w" || flag == "--warmup_iters") {
    o.warmup_iters = static_cast<int>(parse_integer(value, "-w", 0, kIntMax));
  } else if (flag == "-c" || flag == "--check") {
    o.check = parse_integer(value, "-c", 0, kIntMax) != 0;
  } else if (flag == "-o" || flag == "--op") {
    o.ops = parse_ops(value);
    o.all_ops = value == "all";
  } else if (flag == "-d" || flag == "--datatype") {
    o.dtypes = parse_dtypes(value);
    o.all_dtypes = value == "all";
  } else if (flag == "-r" || flag == "--root") {
    o.root = static_cast<int>(parse_integer(value, "-r", 0, kIntMax));
  } else if (flag == "-a" || flag == "--average") {
    o.combine = static_cast<TimeCombine>(parse_integer(value, "-a", 0, 3));
  } else if (flag == "-z" || flag == "--blocking") {
    o.blocking = parse_integer(value, "-z", 0, 1) != 0;
  } else if (flag == "-T" || flag == "--timeout") {
    char* end = nullptr;
    const double seconds = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds) || seconds > 1e9)
      throw UsageError("-T: '" + value + "' is not a positive number of seconds");
    o.timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
  } else if (flag == "--algo") {
    o.algorithm = value;
  } else if (flag == "--transport") {
    o.transport = value;
  }
}

bool takes_value(const std::string& flag) {
  for (const FlagSpec& spec : kValueFlags) {
    if ((spec.short_name != nullptr && flag == spec.short_name) || flag == spec.long_name) return true;
  }
  return false;
}

}  // namespace

size_t parse_size(const std::string& text, const char* flag) {
  if (text.empty()) throw UsageError(std::string(flag) + ": empty size");
  size_t digits_end = text.size();
  size_t multiplier = 1;
  switch (text.back()) {
    case 'K': case 'k': multiplier = size_t{1} << 10; digits_end--; break;
    case 'M': case 'm': multiplier = size_t{1} << 20; digits_end--; break;
    case 'G': case 'g': multiplier = size_t{1} << 30; digits_end--; break;
    default: break;
  }
  const std::string digits = text.substr(0, digits_end);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(std::string(flag) + ": '" + text + "' is not a size (digits with an optional K, M or G)");
  errno = 0;
  const unsigned long long v = std::strtoull(digits.c_str(), nullptr, 10);
  if (errno == ERANGE || v > std::numeric_limits<size_t>::max() / multiplier)
    throw UsageError(std::string(flag) + ": '" + text + "' is too large");
  return static_cast<size_t>(v) * multiplier;
}

PerfOptions parse_options(int argc, char** argv) {
  PerfOptions o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) {
      positional.push_back(arg);
      continue;
    }
    std::string value;
    bool has_inline_value = false;
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline_value = true;
      }
    }
    if (!takes_value(arg)) throw UsageError("unknown option '" + arg + "'");
    if (!has_inline_value) {
      if (i + 1 >= argc) throw UsageError("option '" + arg + "' needs a value");
      value = argv[++i];
    }
    apply(o, arg, value);
  }
  if (o.help) return o;
  if (positional.empty())
    throw UsageError("missing the collective to measure (" + collective_names() + ")");
  if (positional.size() > 1) throw UsageError("unexpected argument '" + positional[1] + "'");
  o.collective = positional[0];
  find_collective(o.collective);  // throws UsageError for an unknown name
  if (o.max_bytes < o.min_bytes)
    throw UsageError("-e (" + std::to_string(o.max_bytes) + ") is smaller than -b (" + std::to_string(o.min_bytes) + ")");
  if (o.step_factor <= 1 && o.step_bytes == 0) throw UsageError("-i 0 with no -f would never reach -e");
  return o;
}

std::string usage_text(const char* program) {
  return std::string("usage: ") + program + " COLLECTIVE [options]\n" +
         "  COLLECTIVE            " + collective_names() + "\n"
         "  -b, --minbytes N      smallest size in bytes (K/M/G suffixes; default 32M)\n"
         "  -e, --maxbytes N      largest size in bytes (default 32M)\n"
         "  -i, --stepbytes N     add N bytes per step when -f is not given (default 1M)\n"
         "  -f, --stepfactor F    multiply the size by F per step\n"
         "  -n, --iters N         timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N  untimed iterations before each size (default 5)\n"
         "  -c, --check 0|1       check every result element (default 1)\n"
         "  -o, --op OP           sum, prod, min, max, avg, premulsum (mulsum), band, bor, bxor, all (default sum)\n"
         "  -d, --datatype T      int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, all (default float)\n"
         "  -r, --root R          root rank of broadcast, reduce, gather, scatter (default 0)\n"
         "  -a, --average 0-3     time printed: 0 rank 0's, 1 average, 2 minimum, 3 maximum over ranks (default 1)\n"
         "  -z, --blocking 0|1    wait for each collective before issuing the next (default 0)\n"
         "  -T, --timeout SEC     per-collective timeout (default KOLO_TIMEOUT)\n"
         "      --algo NAME       force an algorithm (ring, tree, rd, direct, ...)\n"
         "      --transport NAME  force a transport (tcp, shm)\n"
         "Run it under a launcher: kolorun -n 4 " + program + " allreduce -b 8 -e 16M -f 4\n"
         "Exit status: 0 ok, 1 wrong results, 2 bad command line, 3 kolo error.\n";
}

const char* nccl_dtype_name(DataType t) {
  switch (t) {
    case DataType::int8: return "int8";
    case DataType::uint8: return "uint8";
    case DataType::int32: return "int32";
    case DataType::uint32: return "uint32";
    case DataType::int64: return "int64";
    case DataType::uint64: return "uint64";
    case DataType::float16: return "half";
    case DataType::bfloat16: return "bfloat16";
    case DataType::float32: return "float";
    case DataType::float64: return "double";
  }
  return "?";
}

const char* nccl_op_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum: return "sum";
    case ReduceKind::prod: return "prod";
    case ReduceKind::min: return "min";
    case ReduceKind::max: return "max";
    case ReduceKind::avg: return "avg";
    case ReduceKind::premul_sum: return "mulsum";
    case ReduceKind::band: return "band";
    case ReduceKind::bor: return "bor";
    case ReduceKind::bxor: return "bxor";
  }
  return "?";
}

}  // namespace kolo::perf

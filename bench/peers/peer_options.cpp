#include "peer_options.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace kolo::peers {
namespace {

constexpr const char* kValueFlags[][2] = {
    {"-b", "--minbytes"}, {"-e", "--maxbytes"},     {"-i", "--stepbytes"}, {"-f", "--stepfactor"},
    {"-n", "--iters"},    {"-w", "--warmup_iters"}, {"-c", "--check"},     {"-o", "--op"},
    {"-d", "--datatype"}, {"-r", "--root"},         {"-a", "--average"},   {"-T", "--timeout"},
    {"", "--algo"},       {"", "--store-dir"},
};

// The short spelling of a flag ("--iters" -> "-n"); long-only flags keep their name.
std::string canonical(const std::string& flag) {
  for (const auto& pair : kValueFlags) {
    if (flag == pair[0] || flag == pair[1]) return pair[0][0] != '\0' ? pair[0] : pair[1];
  }
  return {};
}

long long parse_integer(const std::string& text, const std::string& flag, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) throw UsageError(flag + ": '" + text + "' is not an integer");
  if (v < lo || v > hi)
    throw UsageError(flag + ": " + text + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  for (const std::string& s : list) {
    if (s == item) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& list) {
  std::string text;
  for (const std::string& s : list) text += (text.empty() ? "" : ", ") + s;
  return text;
}

void apply(PeerOptions& o, const std::string& flag, const std::string& value, const ProgramTraits& traits) {
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
    o.ops = parse_ops(value);
  } else if (flag == "-d") {
    o.types = parse_types(value);
  } else if (flag == "-r") {
    o.root = static_cast<int>(parse_integer(value, flag, 0, kIntMax));
  } else if (flag == "-a") {
    o.combine = static_cast<TimeCombine>(parse_integer(value, flag, 0, 3));
  } else if (flag == "-T") {
    if (!traits.has_timeout) throw UsageError(std::string(traits.name) + " has no -T: the library has no timeout to set");
    char* end = nullptr;
    const double seconds = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds) || seconds > 1e9)
      throw UsageError("-T: '" + value + "' is not a positive number of seconds");
    o.timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
  } else if (flag == "--algo") {
    if (traits.algorithms.empty()) throw UsageError(std::string(traits.name) + " has no --algo");
    if (!contains(traits.algorithms, value))
      throw UsageError("--algo: unknown algorithm '" + value + "' (expected " + joined(traits.algorithms) + ")");
    o.algorithm = value;
  } else if (flag == "--store-dir") {
    if (!traits.has_store_dir) throw UsageError(std::string(traits.name) + " has no --store-dir");
    o.store_dir = value;
  }
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

PeerOptions parse_options(int argc, char** argv, const ProgramTraits& traits) {
  PeerOptions o;
  if (!traits.algorithms.empty()) o.algorithm = traits.algorithms.front();
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
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      inline_value = true;
    }
    const std::string flag = canonical(arg);
    if (flag.empty()) throw UsageError("unknown option '" + arg + "'");
    if (!inline_value) {
      if (i + 1 >= argc) throw UsageError("option '" + arg + "' needs a value");
      value = argv[++i];
    }
    apply(o, flag, value, traits);
  }
  if (o.help) return o;
  if (positional.empty()) throw UsageError("missing the collective to measure (" + joined(traits.collectives) + ")");
  if (positional.size() > 1) throw UsageError("unexpected argument '" + positional[1] + "'");
  o.collective = positional[0];
  // nccl-tests' binary names, as kolo-perf accepts them.
  if (o.collective == "all_reduce") o.collective = "allreduce";
  if (o.collective == "all_gather") o.collective = "allgather";
  if (o.collective == "reduce_scatter") o.collective = "reducescatter";
  if (!contains(traits.collectives, o.collective))
    throw UsageError("unknown collective '" + o.collective + "' (" + traits.name + " measures " +
                     joined(traits.collectives) + ")");
  if (o.max_bytes < o.min_bytes)
    throw UsageError("-e (" + std::to_string(o.max_bytes) + ") is smaller than -b (" + std::to_string(o.min_bytes) + ")");
  if (o.step_factor <= 1 && o.step_bytes == 0) throw UsageError("-i 0 with no -f would never reach -e");
  return o;
}

std::string usage_text(const ProgramTraits& traits) {
  std::string text = std::string("usage: ") + traits.name + " COLLECTIVE [options]\n" +
                     "  COLLECTIVE            " + joined(traits.collectives) + "\n" +
                     "  -b, --minbytes N      smallest size in bytes (K/M/G suffixes; default 32M)\n"
                     "  -e, --maxbytes N      largest size in bytes (default 32M)\n"
                     "  -i, --stepbytes N     add N bytes per step when -f is not given (default 1M)\n"
                     "  -f, --stepfactor F    multiply the size by F per step\n"
                     "  -n, --iters N         timed iterations per size (default 20)\n"
                     "  -w, --warmup_iters N  untimed iterations before each size (default 5)\n"
                     "  -c, --check 0|1       check every result element (default 1)\n"
                     "  -o, --op OP           sum, prod, min, max or all (default sum)\n"
                     "  -d, --datatype T      int8 uint8 int32 uint32 int64 uint64 float double, all (default float)\n"
                     "  -r, --root R          root rank of broadcast and reduce (default 0)\n"
                     "  -a, --average 0-3     time printed: 0 rank 0's, 1 average, 2 minimum, 3 maximum (default 1)\n";
  if (traits.has_timeout) text += "  -T, --timeout SEC     the library's per-operation timeout (default 300)\n";
  if (!traits.algorithms.empty()) {
    text += "      --algo NAME       " + joined(traits.algorithms) + " (default " + traits.algorithms.front() + ")\n";
  }
  if (traits.has_store_dir)
    text += "      --store-dir DIR   Gloo FileStore directory (default $TMPDIR/kolo-perf-gloo-$KOLO_JOB_ID)\n";
  text += "Exit status: 0 ok, 1 wrong results, 2 bad command line, 3 library error.\n";
  return text;
}

}  // namespace kolo::peers

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

}  // namespace

PerfOptions parse_options(int argc, char** argv) {
  PerfOptions o;
  const std::vector<bench::ExtraFlag> own = {{"-T", "--timeout"}, {"", "--algo"}, {"", "--transport"},
                                             {"", "--inject-wrong"}};
  bench::parse_common(argc, argv, o, own, [&o](const std::string& flag, const std::string& value) {
    if (flag == "-T") {
      char* end = nullptr;
      const double seconds = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds) || seconds > 1e9)
        throw UsageError("-T: '" + value + "' is not a positive number of seconds");
      o.timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
    } else if (flag == "--algo") {
      o.algorithm = value;
    } else if (flag == "--transport") {
      o.transport = value;
    } else if (flag == "--inject-wrong") {
      o.inject_wrong = bench::parse_integer(value, flag, 0, 1) != 0;
    }
  });
  o.ops = parse_ops(o.op_text);
  o.all_ops = o.op_text == "all";
  o.dtypes = parse_dtypes(o.dtype_text);
  o.all_dtypes = o.dtype_text == "all";
  if (o.help || o.version) return o;
  find_collective(o.collective);  // throws UsageError for an unknown name
  return o;
}

std::string usage_text(const char* program) {
  const std::string name = program;
  const std::string implied = bench::collective_of_program(name);
  const std::string head = implied.empty() ? name + " COLLECTIVE [options]\n" +
                                                 "  COLLECTIVE                " + collective_names() + "\n"
                                           : name + " [options]   (measures " + implied + ")\n";
  return "usage: " + head +
         bench::common_usage_lines(
             "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, all (default float)",
             "sum, prod, min, max, avg, premulsum (mulsum), band, bor, bxor, all (default sum)") +
         "  -T, --timeout SEC         per-collective timeout (default KOLO_TIMEOUT; fractions allowed)\n"
         "      --algo NAME           force an algorithm (ring, tree, rd, direct, ...)\n"
         "      --transport NAME      force a transport (tcp, shm, ibverbs)\n"
         "      --inject-wrong 0|1    testing: spoil one output element before each check (exit 7)\n"
         "Run it under a launcher: kolorun -n 4 kolo-perf allreduce -b 8 -e 16M -f 4\n"
         "  (or by nccl-tests' names: kolorun -n 4 all_reduce_perf -b 8 -e 16M -f 4)\n"
         "Exit status: 0 ok, 2 bad command line, 3 kolo error, 7 wrong results or below 0.9 x the --min-bw floor.\n";
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

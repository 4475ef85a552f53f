#include "options.hpp"

#include <iterator>

#include "collective_specs.hpp"
#include "kolo/error.hpp"
#include "kolo/types.hpp"
#include "kolo_backend.hpp"

namespace kolo::perf {
namespace {

std::vector<bench::RedOp> parse_ops(const std::string& text) {
  if (text == "all") return {std::begin(bench::kAllRedOps), std::end(bench::kAllRedOps)};
  // nccl-tests prints and accepts "mulsum" for the pre-multiplied sum.
  const std::string name = text == "mulsum" ? "premul_sum" : text;
  try {
    return {from_kolo(parse_reduce(name))};
  } catch (const kolo::InvalidArgument& e) {
    throw UsageError(std::string("-o: ") + e.what() + " or all");
  }
}

std::vector<bench::ElementType> parse_dtypes(const std::string& text) {
  if (text == "all") return {std::begin(bench::kAllElementTypes), std::end(bench::kAllElementTypes)};
  try {
    return {from_kolo(parse_dtype(text))};
  } catch (const kolo::InvalidArgument& e) {
    throw UsageError(std::string("-d: ") + e.what() + " or all");
  }
}

}  // namespace

PerfOptions parse_options(int argc, char** argv) {
  PerfOptions o;
  o.own_gpu_flags = true;  // -g and -G are kolo-perf's (device memory), not noted and ignored
  const std::vector<bench::ExtraFlag> own = {{"-T", "--timeout"}, {"", "--algo"}, {"", "--transport"},
                                             {"", "--inject-wrong"}};
  bench::parse_common(argc, argv, o, own, [&o](const std::string& flag, const std::string& value) {
    if (flag == "-T") {
      o.timeout = bench::parse_seconds(value, flag);
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
  bench::find_collective(o.collective);  // throws UsageError for an unknown name
  // Refused rather than accepted and ignored: a GPU user's script must not silently measure
  // something else. -g 1 without a usable GPU is refused later (main.cpp, open_cuda_device).
  if (o.gpus > 1)
    throw UsageError("-g " + std::to_string(o.gpus) +
                     ": kolo serves one GPU per process for now; start one process per GPU with -g 1 "
                     "(kolorun -n N ... -g 1)");
  if (o.cuda_graph != 0) throw UsageError("-G " + std::to_string(o.cuda_graph) + ": CUDA graph capture is not supported yet");
  return o;
}

std::string usage_text(const char* program) {
  const std::string name = program;
  const std::string implied = bench::collective_of_program(name);
  const std::string head = implied.empty() ? name + " COLLECTIVE [options]\n" +
                                                 "  COLLECTIVE                " + bench::collective_names() + "\n"
                                           : name + " [options]   (measures " + implied + ")\n";
  return "usage: " + head +
         bench::common_usage_lines(
             "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, all (default float)",
             "sum, prod, min, max, avg, premulsum (mulsum), band, bor, bxor, all (default sum)", true) +
         "  -g, --ngpus 0|1           GPUs per process: 1 measures CUDA device memory, on device\n"
         "                            (LOCAL_RANK x g) mod the visible devices, issued on a stream of\n"
         "                            kolo-perf's; 0 (the default, unlike nccl-tests) host memory.\n"
         "                            More than 1: refused (one GPU per process). No usable GPU: refused\n"
         "  -G, --cudagraph N         CUDA graph capture: not supported yet (any N but 0 is refused)\n" +
         "  -T, --timeout SEC         per-collective timeout (default KOLO_TIMEOUT; fractions allowed)\n"
         "      --algo NAME           force an algorithm (ring, tree, rd, direct, ...)\n"
         "      --transport NAME      force a transport (tcp, shm, ibverbs)\n"
         "      --inject-wrong 0|1    testing: spoil one output element before each check (exit 7)\n"
         "Run it under a launcher: kolorun -n 4 kolo-perf allreduce -b 8 -e 16M -f 4\n"
         "  (or by nccl-tests' names: kolorun -n 4 all_reduce_perf -b 8 -e 16M -f 4)\n"
         "Exit status: 0 ok, 2 bad command line, 3 kolo error or no usable GPU for -g 1, 7 wrong results or below 0.9 x the --min-bw floor.\n";
}

}  // namespace kolo::perf

// kolo-perf: nccl-tests' *_perf programs for kolo, one binary for every collective.
//   kolorun -n 4 kolo-perf allreduce -b 8 -e 16M -f 4 -c 1
//   kolorun -n 4 all_reduce_perf -b 8 -e 16M -f 4 -c 1     (a symlink: argv[0] names the collective)
// Joins the group described by the launch environment (kolo::init_from_env) and runs the
// benchmark harness (bench/common/harness.hpp) over kolo (kolo_backend.hpp): sweeps the sizes,
// prints nccl-tests' table on rank 0 (and with -J, --json, --csv writes every row) and exits as
// nccl-tests does: 0 ok, 7 wrong results or average busbw below 0.9 x the floor; and 2 bad
// command line (-g 2, -G 1 too), 3 kolo error or, for -g 1, no usable GPU.
// -g 1 measures CUDA device memory (bench/common/device_memory.hpp) on device
// (LOCAL_RANK x g) mod the visible devices; without -g (or -g 0) host memory, as always.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "device_memory.hpp"
#include "harness.hpp"
#include "kolo/kolo.hpp"
#include "kolo/version.hpp"
#include "kolo_backend.hpp"
#include "options.hpp"
#include "report.hpp"

namespace {

using kolo::bench::kExitError;
using kolo::bench::kExitUsage;

int run(const kolo::perf::PerfOptions& o, std::unique_ptr<kolo::bench::DeviceMemory>& device,
        std::shared_ptr<kolo::ProcessGroup>& group) {
  kolo::GroupOptions go;
  go.timeout = o.timeout;
  go.transport = o.transport;
  // Before joining the group: a machine without a GPU fails every rank alike, at once and
  // quietly (the launcher ends a job whose rank failed). Throws DeviceUnavailable: never a host
  // run instead.
  if (o.gpus > 0) device = kolo::bench::open_cuda_device(kolo::read_launch_env().local_rank, o.gpus);
  group = kolo::init_from_env(go);
  if (o.collective == "sendrecv" && group->size() < 2)
    throw kolo::perf::UsageError("sendrecv needs at least 2 ranks (kolo has no send to oneself)");
  const std::string algo = o.algorithm.empty() ? "auto" : o.algorithm;
  const std::string transport = o.transport.empty() ? "auto" : o.transport;
  const std::string memory = device ? " memory cuda:" + std::to_string(device->info().index) : "";
  kolo::perf::KoloBackend backend(
      *group, o.algorithm, std::string(kolo::version_string()) + " algo " + algo + " transport " + transport + memory,
      device.get());
  const int status = kolo::bench::run_benchmark(backend, o, "kolo-perf",
                                                "[kolo] algo " + algo + " transport " + transport, device.get());
  group->shutdown();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  kolo::perf::PerfOptions o;
  try {
    o = kolo::perf::parse_options(argc, argv);
  } catch (const kolo::perf::UsageError& e) {
    std::fprintf(stderr, "kolo-perf: %s\n\n%s", e.what(), kolo::perf::usage_text(argv[0]).c_str());
    return kExitUsage;
  }
  if (o.version) {
    std::printf("%s\n", kolo::bench::version_line(argv[0]).c_str());
    return 0;
  }
  if (o.help) {
    std::printf("%s", kolo::perf::usage_text(argv[0]).c_str());
    return 0;
  }
  // The device (its stream) outlives the group: after a failure the abort below still finds the
  // stream that operations were issued on.
  std::unique_ptr<kolo::bench::DeviceMemory> device;
  std::shared_ptr<kolo::ProcessGroup> group;
  const auto fail = [&](const char* kind, const char* what, int code) {
    const std::string who = group ? "rank " + std::to_string(group->rank()) + ": " : std::string();
    std::fprintf(stderr, "kolo-perf: %s%s%s\n", who.c_str(), kind, what);
    std::fflush(stderr);
    // Tell the peers at once instead of leaving them to time out.
    if (group) group->abort(std::string("kolo-perf failed: ") + what);
    return code;
  };
  try {
    return run(o, device, group);
  } catch (const kolo::perf::UsageError& e) {
    return fail("", e.what(), kExitUsage);
  } catch (const kolo::Error& e) {
    return fail("", e.what(), kExitError);
  } catch (const kolo::bench::DeviceUnavailable& e) {
    return fail("", e.what(), kExitError);
  } catch (const std::exception& e) {
    return fail("unexpected error: ", e.what(), kExitError);
  }
}

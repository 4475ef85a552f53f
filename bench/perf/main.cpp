// kolo-perf: nccl-tests' *_perf programs for kolo, one binary for every collective.
//   kolorun -n 4 kolo-perf allreduce -b 8 -e 16M -f 4 -c 1
//   kolorun -n 4 all_reduce_perf -b 8 -e 16M -f 4 -c 1     (a symlink: argv[0] names the collective)
// Joins the group described by the launch environment (kolo::init_from_env) and runs the
// benchmark harness (bench/common/harness.hpp) over kolo (kolo_backend.hpp): sweeps the sizes,
// prints nccl-tests' table on rank 0 (and with -J, --json, --csv writes every row) and exits as
// nccl-tests does: 0 ok, 7 wrong results or average busbw below 0.9 x the floor; and 2 bad
// command line, 3 kolo error.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "harness.hpp"
#include "kolo/kolo.hpp"
#include "kolo/version.hpp"
#include "kolo_backend.hpp"
#include "options.hpp"
#include "report.hpp"

namespace {

using kolo::bench::kExitError;
using kolo::bench::kExitUsage;

int run(const kolo::perf::PerfOptions& o, std::shared_ptr<kolo::ProcessGroup>& group) {
  kolo::GroupOptions go;
  go.timeout = o.timeout;
  go.transport = o.transport;
  group = kolo::init_from_env(go);
  if (o.collective == "sendrecv" && group->size() < 2)
    throw kolo::perf::UsageError("sendrecv needs at least 2 ranks (kolo has no send to oneself)");
  const std::string algo = o.algorithm.empty() ? "auto" : o.algorithm;
  const std::string transport = o.transport.empty() ? "auto" : o.transport;
  kolo::perf::KoloBackend backend(*group, o.algorithm,
                                  std::string(kolo::version_string()) + " algo " + algo + " transport " + transport);
  const int status =
      kolo::bench::run_benchmark(backend, o, "kolo-perf", "[kolo] algo " + algo + " transport " + transport);
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
    return run(o, group);
  } catch (const kolo::perf::UsageError& e) {
    return fail("", e.what(), kExitUsage);
  } catch (const kolo::Error& e) {
    return fail("", e.what(), kExitError);
  } catch (const std::exception& e) {
    return fail("unexpected error: ", e.what(), kExitError);
  }
}

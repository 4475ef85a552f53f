// kolorun: starts N local copies of a program with torchrun-style rendezvous variables and
// supervises them until they all end. See options.cpp (usage_text) for the interface.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kolo/error.hpp"
#include "kolorun/job_supervisor.hpp"
#include "kolorun/options.hpp"

namespace {

constexpr int kUsageExitCode = 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace kolo::launcher;
  LaunchOptions options;
  double grace_seconds = kDefaultGraceSeconds;
  try {
    options = parse_launch_options(std::vector<std::string>(argv + 1, argv + argc));
    grace_seconds = parse_grace_seconds(std::getenv("KOLO_LAUNCH_GRACE"));
    if (!options.show_help && !options.show_version)
      options.rank_cpus = plan_binding(options.bind, options.nproc, options.hosts.empty(), allowed_cpus());
  } catch (const kolo::InvalidArgument& e) {
    std::fprintf(stderr, "kolorun: %s\nTry 'kolorun --help' for usage.\n", e.what());
    return kUsageExitCode;
  }
  if (options.show_help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  if (options.show_version) {
    std::printf("kolorun (kolo) %s\n", KOLO_VERSION);
    return 0;
  }
  try {
    JobSupervisor supervisor(options, grace_seconds);
    return supervisor.run();
  } catch (const kolo::Error& e) {
    // Reached only before any rank started or on a broken poll(); in the latter case the ranks
    // die with kolorun through their parent-death signal.
    std::fprintf(stderr, "kolorun: %s\n", e.what());
    return 1;
  }
}

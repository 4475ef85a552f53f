// The flight recorder across real processes: a stalled rank makes the others time out and dump
// their recorders, and kolo-trace (scripts/kolo-trace, run with the system python3) names the
// stalled rank and the collective; SIGUSR1 dumps a live job; KOLO_TRACE writes a Chrome trace per
// rank listing the job's collectives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kolo-fr-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(FlightRecorder, StalledRankIsNamedByKoloTrace) {
  const fs::path dir = fresh_dir("stall");
  LaunchSpec spec = worker_launch("fr-stall", 3, std::chrono::seconds(60), "2");
  spec.env["KOLO_FR_DIR"] = dir.string();
  const WorldOutcome outcome = run_world(spec);
  for (const RankOutcome& r : outcome.ranks) EXPECT_FALSE(r.succeeded()) << "the stall must fail the job: " << r.describe();
  // Ranks 0 and 2 timed out waiting for rank 1 and dumped.
  EXPECT_TRUE(fs::exists(dir / "default.rank0.json") || !fs::is_empty(dir)) << dir;
  const std::string trace = run_command("python3 '" + std::string(KOLO_SOURCE_ROOT) + "/scripts/kolo-trace' '" +
                                        dir.string() + "' 2>&1");
  EXPECT_NE(trace.find("verdict: rank 1 is behind"), std::string::npos) << trace;
  EXPECT_NE(trace.find("allreduce #"), std::string::npos) << trace;
  EXPECT_NE(trace.find("waiting for rank 1"), std::string::npos) << trace;
  fs::remove_all(dir);
}

TEST(FlightRecorder, SigusrOneDumpsALiveJobAndKoloTraceWritesAChromeTrace) {
  const fs::path dir = fresh_dir("usr1");
  LaunchSpec spec = worker_launch("fr-sigusr1", 2, std::chrono::seconds(60));
  spec.env["KOLO_FR_DIR"] = dir.string();
  spec.env["KOLO_TRACE"] = (dir / "trace.%r.json").string();
  const WorldOutcome outcome = run_world(spec);
  EXPECT_TRUE(outcome.all_succeeded()) << outcome.describe();
  for (int r = 0; r < 2; ++r) {
    const std::string trace = read_file(dir / ("trace." + std::to_string(r) + ".json"));
    ASSERT_NE(trace.find("{\"traceEvents\":["), std::string::npos) << "rank " << r << ": " << trace;
    size_t events = 0;
    for (size_t at = trace.find("\"ph\":\"X\""); at != std::string::npos; at = trace.find("\"ph\":\"X\"", at + 1)) ++events;
    EXPECT_GE(events, 4u) << "three all-reduces and a barrier, at least: " << trace;
    EXPECT_NE(trace.find("\"name\":\"allreduce #"), std::string::npos) << trace;
    EXPECT_NE(trace.find("\"pid\":" + std::to_string(r)), std::string::npos) << trace;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kolo::coltest

// The flight recorder across real processes: a stalled rank makes the others time out and dump
// their recorders, and kolo-trace (tools/kolo-trace/kolo-trace, run with the system python3) names the
// stalled rank and the collective; SIGUSR1 dumps a live job; KOLO_TRACE writes a Chrome trace per
// rank listing the job's collectives; two jobs dumped into one folder are told apart by their job
// id, and kolo-trace reads one of them only.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>

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

// The command's output (stdout and stderr, if the command says 2>&1) and exit status.
std::pair<std::string, int> run_command_status(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {out, -1};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
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
  const std::string trace = run_command("python3 '" + std::string(KOLO_SOURCE_ROOT) + "/tools/kolo-trace/kolo-trace' '" +
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

// The value of a string field of a dump (compact JSON: "name":"value").
std::string json_field(const std::string& json, const std::string& name) {
  const std::string key = "\"" + name + "\":\"";
  const size_t at = json.find(key);
  if (at == std::string::npos) return "?";
  const size_t start = at + key.size();
  return json.substr(start, json.find('"', start) - start);
}

// A 2-rank job with kolorun's KOLO_JOB_ID and a 3-rank one without (named after its
// MASTER_ADDR:MASTER_PORT) dump into one folder; kolo-trace refuses the mix, listing both, and
// reads each alone with --job.
TEST(FlightRecorder, KoloTraceReadsOneJobOfAFolderOfTwo) {
  const fs::path dir = fresh_dir("two-jobs");
  const std::string named = "frmix" + std::to_string(::getpid());
  LaunchSpec a = worker_launch("fr-sigusr1", 2, std::chrono::seconds(60));
  a.env["KOLO_FR_DIR"] = dir.string();
  a.env["KOLO_JOB_ID"] = named;
  ASSERT_TRUE(run_world(a).all_succeeded());
  LaunchSpec b = worker_launch("fr-sigusr1", 3, std::chrono::seconds(60));
  b.env["KOLO_FR_DIR"] = dir.string();
  for (const char* id : {"KOLO_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_orte_ess_jobid",
                         "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"})
    b.env[id] = "";  // empty counts as unset
  ASSERT_TRUE(run_world(b).all_succeeded());

  std::map<std::string, std::set<std::string>> ranks_of_job;  // job id -> rank fields seen
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    const std::string json = read_file(e.path());
    const std::string job = json_field(json, "job");
    EXPECT_EQ(e.path().filename().string().rfind(job + ".default.rank", 0), 0u) << e.path() << " is not named by its job " << job;
    const size_t size_at = json.find("\"world_size\":");
    ASSERT_NE(size_at, std::string::npos) << json;
    EXPECT_EQ(json.substr(size_at + 13, 2), job == named ? "2," : "3,") << json;
    ranks_of_job[job].insert(e.path().filename().string());
  }
  ASSERT_EQ(ranks_of_job.size(), 2u) << "two jobs' dumps";
  ASSERT_EQ(ranks_of_job[named].size(), 2u);
  std::string derived;
  for (const auto& [job, files] : ranks_of_job)
    if (job != named) derived = job;
  EXPECT_EQ(derived.rfind("master-127.0.0.1-", 0), 0u) << "the job without an id is named by its store: " << derived;
  EXPECT_EQ(ranks_of_job[derived].size(), 3u);

  const std::string trace = "python3 '" + std::string(KOLO_SOURCE_ROOT) + "/tools/kolo-trace/kolo-trace' ";
  const auto [mixed, mixed_status] = run_command_status(trace + "'" + dir.string() + "' 2>&1");
  EXPECT_EQ(mixed_status, 2) << "two jobs read together must fail: " << mixed;
  EXPECT_EQ(mixed.find("verdict"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("--job " + named), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("--job " + derived), std::string::npos) << mixed;
  const auto [first, first_status] = run_command_status(trace + "--job " + named + " '" + dir.string() + "' 2>&1");
  EXPECT_EQ(first_status, 0) << first;
  EXPECT_NE(first.find("group default: dumps from 2 of 2 ranks"), std::string::npos) << first;
  const auto [second, second_status] = run_command_status(trace + "--job " + derived + " '" + dir.string() + "' 2>&1");
  EXPECT_EQ(second_status, 0) << second;
  EXPECT_NE(second.find("group default: dumps from 3 of 3 ranks"), std::string::npos) << second;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kolo::coltest

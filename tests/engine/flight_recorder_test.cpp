// The flight recorder (src/engine/flight_recorder.hpp): entries for operations that completed
// in their issuing call, written after the fact, must still read in issue order, as done, and be
// dated one time in 16 (every time when a trace is being written); dumps are named by the job
// the launch environment names, and say its id and world size.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/flight_recorder.hpp"

namespace kolo::engine {
namespace {

struct Entry {
  uint64_t seq;
  std::string state, transport;
  uint64_t started_us, finished_us;
};

// The entries of json(), by a pattern independent of the recorder's own code.
std::vector<Entry> entries(const FlightRecorder& fr) {
  const std::string json = fr.json("test");
  static const std::regex one(
      "\\{\"seq\":([0-9]+),\"op\":\"[a-z_]+\",\"bytes\":[0-9]+,\"root\":-?[0-9]+,\"algorithm\":\"[^\"]*\","
      "\"transport\":\"([^\"]*)\",\"state\":\"([a-z]+)\",\"waiting_on\":-?[0-9]+,\"issued_us\":[0-9]+,"
      "\"started_us\":([0-9]+),\"finished_us\":([0-9]+)\\}");
  std::vector<Entry> out;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), one); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.push_back(Entry{std::stoull(m[1]), m[3], m[2], std::stoull(m[4]), std::stoull(m[5])});
  }
  return out;
}

TEST(FlightRecorderDirect, EntriesWrittenAfterTheFactKeepIssueOrderAndOneInSixteenIsDated) {
  ::unsetenv("KOLO_TRACE");
  FlightRecorder fr(256, 0, 2, "test");
  // Queued operations (recorded at issue, finished later) between ones that completed at issue.
  FlightEntry* queued = nullptr;
  for (uint64_t seq = 0; seq < 100; ++seq) {
    if (seq == 40) {
      queued = fr.record(seq, "allreduce", "ring", 4096, -1, /*stamp=*/true);
      continue;
    }
    fr.record_ran(seq, "broadcast", "direct", 8, 0, "shm");
  }
  fr.started(queued, "tcp");
  fr.finished(queued, true);
  const std::vector<Entry> es = entries(fr);
  ASSERT_EQ(es.size(), 100u) << fr.json("test");
  size_t dated = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    EXPECT_EQ(es[i].seq, i) << "entry " << i << " out of issue order";
    EXPECT_EQ(es[i].state, "done") << "entry " << i;
    if (i == 40) {
      EXPECT_EQ(es[i].transport, "tcp");
      EXPECT_GT(es[i].finished_us, 0u) << "a queued operation is always dated";
      continue;
    }
    EXPECT_EQ(es[i].transport, "shm") << "entry " << i;
    EXPECT_EQ(es[i].started_us, es[i].finished_us) << "entry " << i << ": started and finished in one moment";
    if (es[i].finished_us != 0) ++dated;
  }
  EXPECT_EQ(dated, 99u / 16) << "one of 16 direct entries is dated (99 of them)";
}

TEST(FlightRecorderDirect, EveryEntryIsDatedWhileATraceIsWritten) {
  const auto dir = std::filesystem::temp_directory_path() / ("kolo-fr-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string trace = (dir / "trace.%r.json").string();
  ::setenv("KOLO_TRACE", trace.c_str(), 1);
  {
    FlightRecorder fr(64, 0, 1, "traced");
    for (uint64_t seq = 0; seq < 20; ++seq) fr.record_ran(seq, "barrier", "direct", 0, -1, "local");
    const std::vector<Entry> es = entries(fr);
    ASSERT_EQ(es.size(), 20u);
    for (const Entry& e : es) EXPECT_GT(e.finished_us, 0u) << "entry " << e.seq << " left undated under KOLO_TRACE";
  }
  ::unsetenv("KOLO_TRACE");
  const std::string written = (dir / "trace.0.json").string();
  std::ifstream in(written);
  ASSERT_TRUE(in) << "no trace written to " << written;
  std::stringstream text;
  text << in.rdbuf();
  size_t events = 0;
  for (size_t at = text.str().find("\"barrier #"); at != std::string::npos; at = text.str().find("\"barrier #", at + 1))
    ++events;
  EXPECT_EQ(events, 20u) << text.str();
  std::filesystem::remove_all(dir);
}

// Sets the launch variables a test names and clears the others the job id comes from; puts
// everything back when it goes.
using Env = std::map<std::string, std::string>;
class ScopedLaunchEnv {
 public:
  explicit ScopedLaunchEnv(const std::map<std::string, std::string>& set) {
    for (const char* name : {"KOLO_JOB_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID",
                             "SLURM_STEP_ID", "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                             "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS",
                             "KOLO_FR_DIR"}) {
      const char* v = std::getenv(name);
      saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
      ::unsetenv(name);
    }
    for (const auto& [k, v] : set) {
      if (!saved_.count(k)) saved_[k] = std::getenv(k.c_str()) ? std::optional<std::string>(std::getenv(k.c_str())) : std::nullopt;
      ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~ScopedLaunchEnv() {
    for (const auto& [k, v] : saved_) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

std::string job_of(const std::map<std::string, std::string>& env, const std::string& fallback = "") {
  ScopedLaunchEnv e(env);
  return FlightRecorder::job_id_from_environment(fallback);
}

TEST(FlightRecorderJob, TheLaunchEnvironmentNamesTheJob) {
  EXPECT_EQ(job_of({{"KOLO_JOB_ID", "0123abcd"}, {"TORCHELASTIC_RUN_ID", "0123abcd"}, {"MASTER_PORT", "29500"}}),
            "0123abcd")
      << "kolorun's id first";
  EXPECT_EQ(job_of({{"TORCHELASTIC_RUN_ID", "rdzv7"}, {"MASTER_PORT", "29500"}}), "rdzv7");
  EXPECT_EQ(job_of({{"TORCHELASTIC_RUN_ID", "rdzv7"}, {"TORCHELASTIC_RESTART_COUNT", "0"}}), "rdzv7");
  EXPECT_EQ(job_of({{"TORCHELASTIC_RUN_ID", "rdzv7"}, {"TORCHELASTIC_RESTART_COUNT", "2"}}), "rdzv7-attempt2")
      << "a restarted torchrun job is another run";
  EXPECT_EQ(job_of({{"TORCHELASTIC_RUN_ID", "none"}, {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29511"}}),
            "master-10.0.0.7-29511")
      << "torchrun's default run id \"none\" names no job";
  EXPECT_EQ(job_of({{"SLURM_JOB_ID", "4711"}, {"SLURM_STEP_ID", "3"}, {"MASTER_PORT", "29500"}}), "4711.3");
  EXPECT_EQ(job_of({{"SLURM_JOB_ID", "4711"}}), "4711");
  EXPECT_EQ(job_of({{"PMIX_NAMESPACE", "prterun-host-123@1"}}), "prterun-host-123_1");
  EXPECT_EQ(job_of({{"OMPI_MCA_ess_base_jobid", "99"}, {"PMIX_NAMESPACE", "ns"}}), "99");
  EXPECT_EQ(job_of({{"MASTER_PORT", "1234"}}), "master-127.0.0.1-1234");
  EXPECT_EQ(job_of({}, "fallback-id"), "fallback-id");
  EXPECT_EQ(job_of({}), "");
  EXPECT_EQ(job_of({{"KOLO_JOB_ID", "a/../b c"}}), "a_.._b_c") << "it names files: no separators";
  EXPECT_EQ(job_of({{"KOLO_JOB_ID", std::string(100, 'x')}}).size(), 64u);
}

TEST(FlightRecorderJob, WorldSizeFromTheLaunchEnvironment) {
  {
    ScopedLaunchEnv e(Env{{"WORLD_SIZE", "8"}});
    EXPECT_EQ(FlightRecorder::world_size_from_environment(2), 8);
  }
  {
    ScopedLaunchEnv e(Env{{"OMPI_COMM_WORLD_SIZE", "6"}});
    EXPECT_EQ(FlightRecorder::world_size_from_environment(2), 6);
  }
  {
    ScopedLaunchEnv e(Env{{"WORLD_SIZE", "many"}});
    EXPECT_EQ(FlightRecorder::world_size_from_environment(2), 2);
  }
  ScopedLaunchEnv e(Env{});
  EXPECT_EQ(FlightRecorder::world_size_from_environment(3), 3);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  return nlohmann::json::parse(in);
}

// Two jobs' dumps side by side in one folder: each named and labelled by its job, neither
// overwriting the other; the JSON (nlohmann/json's) is what kolo-trace reads.
TEST(FlightRecorderJob, DumpsAreNamedByJobAndSayItsIdAndWorldSize) {
  const auto dir = std::filesystem::temp_directory_path() / ("kolo-fr-job-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string first, second;
  {
    ScopedLaunchEnv e(Env{{"KOLO_FR_DIR", dir.string()}, {"KOLO_JOB_ID", "jobA"}, {"WORLD_SIZE", "8"}});
    FlightRecorder fr(16, 3, 4, "default_split0");
    fr.record_ran(0, "allreduce", "ring", 64, -1, "shm");
    FlightEntry* stuck = fr.record(1, "broadcast", "tree", 128, 2, /*stamp=*/true);
    fr.started(stuck, "tcp");
    // A reason may quote a peer's bytes: not UTF-8, yet the dump is written.
    first = fr.dump("timeout \"quoted\" \xff\xfe");
  }
  {
    ScopedLaunchEnv e(Env{{"KOLO_FR_DIR", dir.string()}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "40001"}});
    FlightRecorder fr(16, 3, 4, "default_split0");
    second = fr.dump("SIGUSR1");
  }
  EXPECT_EQ(first, (dir / "jobA.default_split0.rank3.json").string());
  EXPECT_EQ(second, (dir / "master-127.0.0.1-40001.default_split0.rank3.json").string());
  ASSERT_TRUE(std::filesystem::exists(first) && std::filesystem::exists(second));
  EXPECT_TRUE(std::filesystem::exists(dir / "jobA.default_split0.rank3.txt"));

  const nlohmann::json a = read_json(first);
  EXPECT_EQ(a["job"], "jobA");
  EXPECT_EQ(a["world_size"], 8);
  EXPECT_EQ(a["size"], 4);
  EXPECT_EQ(a["rank"], 3);
  EXPECT_EQ(a["group"], "default_split0");
  EXPECT_EQ(a["pid"], ::getpid());
  EXPECT_EQ(a["reason"].get<std::string>().rfind("timeout \"quoted\" ", 0), 0u) << a["reason"];
  ASSERT_EQ(a["entries"].size(), 2u);
  EXPECT_EQ(a["entries"][0]["op"], "allreduce");
  EXPECT_EQ(a["entries"][0]["state"], "done");
  EXPECT_EQ(a["entries"][1]["op"], "broadcast");
  EXPECT_EQ(a["entries"][1]["root"], 2);
  EXPECT_EQ(a["entries"][1]["state"], "running");
  EXPECT_EQ(a["entries"][1]["transport"], "tcp");
  EXPECT_EQ(a["entries"][1]["waiting_on"], -1);
  EXPECT_GT(a["entries"][1]["started_us"].get<int64_t>(), 0);
  EXPECT_EQ(a["entries"][1]["finished_us"], 0);

  const nlohmann::json b = read_json(second);
  EXPECT_EQ(b["job"], "master-127.0.0.1-40001");
  EXPECT_EQ(b["world_size"], 4) << "no launcher said: the group's size";
  EXPECT_TRUE(b["entries"].empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kolo::engine

// Signals sent to kolorun reach every rank, and a dead kolorun leaves no rank behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "kolorun_process.hpp"
#include "probe_files.hpp"

namespace kolo::launcher::testing {
namespace {

ChildProcess start_workers(const std::string& dir, int nproc, std::vector<std::string> behaviour = {}) {
  std::vector<std::string> argv{kolorun_path(), "-n", std::to_string(nproc), probe_path("KOLO_PROBE_WORKER"), dir};
  argv.insert(argv.end(), behaviour.begin(), behaviour.end());
  return ChildProcess(argv);
}

// True while pid is a live (not zombie) process, read from /proc independently of kolorun.
bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  size_t close = text.rfind(')');  // the command name may itself contain spaces or ')'
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z' && text[close + 2] != 'X';
}

class KolorunForwardsSignal : public ::testing::TestWithParam<int> {};

TEST_P(KolorunForwardsSignal, EveryRankReceivesItAndKolorunReportsIt) {
  const int sig = GetParam();
  const int nproc = 3;
  TempDir dir;
  ChildProcess kolorun = start_workers(dir.path(), nproc);
  ASSERT_TRUE(wait_until_ready(dir.path(), nproc, 10));
  ASSERT_EQ(::kill(kolorun.pid(), sig), 0);
  ProcessResult result = kolorun.wait(10);
  EXPECT_EQ(result.exit_code(), 128 + sig) << result.err;
  EXPECT_NE(result.err.find("kolorun: received "), std::string::npos) << result.err;
  for (int r = 0; r < nproc; ++r) EXPECT_EQ(recorded_signals(dir.path(), r), std::vector<int>{sig}) << "rank " << r;
  EXPECT_LT(result.seconds, 8.0);
}

INSTANTIATE_TEST_SUITE_P(AllForwarded, KolorunForwardsSignal, ::testing::Values(SIGINT, SIGTERM, SIGHUP, SIGQUIT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           switch (info.param) {
                             case SIGINT: return std::string("SIGINT");
                             case SIGTERM: return std::string("SIGTERM");
                             case SIGHUP: return std::string("SIGHUP");
                             default: return std::string("SIGQUIT");
                           }
                         });

TEST(KolorunSignals, SigtermIsFollowedBySigkillAfterTheGracePeriod) {
  TempDir dir;
  ChildProcess kolorun = start_workers(dir.path(), 2, {"--ignore-term"});
  ASSERT_TRUE(wait_until_ready(dir.path(), 2, 10));
  const double signalled_at = monotonic_seconds();
  ASSERT_EQ(::kill(kolorun.pid(), SIGTERM), 0);
  ProcessResult result = kolorun.wait(15);
  const double stop_seconds = monotonic_seconds() - signalled_at;
  EXPECT_EQ(result.exit_code(), 128 + SIGTERM) << result.err;
  EXPECT_GE(stop_seconds, 1.0) << "ranks must get the grace period before SIGKILL";
  EXPECT_LT(stop_seconds, 6.0);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(recorded_signals(dir.path(), r), std::vector<int>{SIGTERM});
  EXPECT_NE(result.err.find("sending SIGKILL"), std::string::npos) << result.err;
}

TEST(KolorunSignals, RanksDieWhenKolorunIsKilled) {
  const int nproc = 3;
  TempDir dir;
  ChildProcess kolorun = start_workers(dir.path(), nproc);
  ASSERT_TRUE(wait_until_ready(dir.path(), nproc, 10));
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) pids.push_back(recorded_pid(dir.path(), r));
  for (pid_t pid : pids) ASSERT_TRUE(process_running(pid));

  ASSERT_EQ(::kill(kolorun.pid(), SIGKILL), 0);
  // The ranks share kolorun's stdout and stderr, so the pipes close only once they are all gone.
  ProcessResult result = kolorun.wait(10);
  EXPECT_FALSE(result.timed_out) << "ranks outlived kolorun";
  const double deadline = monotonic_seconds() + 5;
  for (pid_t pid : pids) {
    while (process_running(pid) && monotonic_seconds() < deadline) ::usleep(10'000);
    EXPECT_FALSE(process_running(pid)) << "rank pid " << pid << " outlived kolorun";
  }
  for (int r = 0; r < nproc; ++r) EXPECT_TRUE(recorded_signals(dir.path(), r).empty()) << "SIGKILL, not a signal it can see";
}

}  // namespace
}  // namespace kolo::launcher::testing

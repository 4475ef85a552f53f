// What kolorun does when a rank fails, is killed, never starts, or the job runs too long.
// The tests run with KOLO_LAUNCH_GRACE=1 (set by ChildProcess) unless they say otherwise.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <fstream>

#include "kolorun_process.hpp"
#include "probe_files.hpp"

namespace kolo::launcher::testing {
namespace {

std::vector<std::string> worker(const std::string& dir, int nproc, std::vector<std::string> behaviour) {
  std::vector<std::string> args{"-n", std::to_string(nproc), probe_path("KOLO_PROBE_WORKER"), dir};
  args.insert(args.end(), behaviour.begin(), behaviour.end());
  return args;
}

std::vector<std::string> elastic(std::vector<std::string> args) {
  args.insert(args.begin(), "--elastic");
  return args;
}

// The first line kolorun itself wrote to stderr.
std::string first_kolorun_line(const std::string& err) {
  for (const std::string& line : split_lines(err))
    if (line.rfind("kolorun: ", 0) == 0) return line;
  return "";
}

TEST(KolorunFailure, FailingRankStopsTheOthersAfterTheGracePeriod) {
  TempDir dir;
  ProcessResult result = run_kolorun(worker(dir.path(), 4, {"--fail-rank", "2", "--exit-code", "3"}));
  EXPECT_EQ(result.exit_code(), 3) << result.err;
  EXPECT_EQ(first_kolorun_line(result.err),
            "kolorun: rank 2 (pid " + std::to_string(recorded_pid(dir.path(), 2)) + ") exited with status 3")
      << result.err;
  // The survivors get one grace period to leave on their own, then SIGTERM ends them.
  EXPECT_GE(result.seconds, 1.0);
  EXPECT_LT(result.seconds, 6.0);
  for (int r : {0, 1, 3}) EXPECT_EQ(recorded_signals(dir.path(), r), std::vector<int>{SIGTERM}) << "rank " << r;
  EXPECT_TRUE(recorded_signals(dir.path(), 2).empty());
}

TEST(KolorunFailure, RanksThatExitDuringTheGracePeriodAreNotSignalled) {
  TempDir dir;
  ProcessResult result = run_kolorun(worker(dir.path(), 3, {"--fail-rank", "0", "--exit-code", "7", "--sleep", "0.3"}),
                                     {{"KOLO_LAUNCH_GRACE", "5"}});
  EXPECT_EQ(result.exit_code(), 7) << result.err;
  EXPECT_LT(result.seconds, 5.0) << "kolorun must not wait out the grace period once all ranks are gone";
  for (int r : {1, 2}) EXPECT_TRUE(recorded_signals(dir.path(), r).empty()) << "rank " << r;
  EXPECT_EQ(result.err.find("SIGTERM"), std::string::npos) << result.err;
}

TEST(KolorunFailure, RankKilledBySignalIsNamedAndSetsTheExitStatus) {
  TempDir dir;
  ProcessResult result = run_kolorun(worker(dir.path(), 3, {"--kill-rank", "1", "--signal", std::to_string(SIGKILL)}));
  EXPECT_EQ(result.exit_code(), 128 + SIGKILL) << result.err;
  EXPECT_EQ(first_kolorun_line(result.err), "kolorun: rank 1 (pid " + std::to_string(recorded_pid(dir.path(), 1)) +
                                                ") was killed by signal 9 (Killed)")
      << result.err;
  for (int r : {0, 2}) EXPECT_EQ(recorded_signals(dir.path(), r), std::vector<int>{SIGTERM}) << "rank " << r;
}

TEST(KolorunFailure, RankIgnoringSigtermIsKilledAfterASecondGracePeriod) {
  TempDir dir;
  ProcessResult result =
      run_kolorun(worker(dir.path(), 2, {"--fail-rank", "0", "--exit-code", "5", "--ignore-term"}));
  EXPECT_EQ(result.exit_code(), 5) << "the first failure decides the exit status\n" << result.err;
  EXPECT_GE(result.seconds, 2.0);  // grace, SIGTERM (ignored), grace, SIGKILL
  EXPECT_LT(result.seconds, 7.0);
  EXPECT_EQ(recorded_signals(dir.path(), 1), std::vector<int>{SIGTERM});
  EXPECT_NE(result.err.find("sending SIGKILL"), std::string::npos) << result.err;
}

// --elastic: a killed rank is named, but the others are not signalled and finish on their own
// (they would shrink their group); the job succeeds because they exit 0.
TEST(KolorunFailure, ElasticLeavesTheSurvivorsOfAKillRunning) {
  TempDir dir;
  ProcessResult result =
      run_kolorun(elastic(worker(dir.path(), 3, {"--kill-rank", "1", "--signal", std::to_string(SIGKILL), "--sleep", "2"})),
                  {{"KOLO_LAUNCH_GRACE", "0.2"}});
  EXPECT_EQ(result.exit_code(), 0) << result.err;
  EXPECT_NE(result.err.find("rank 1 (pid " + std::to_string(recorded_pid(dir.path(), 1)) + ") was killed by signal 9"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("--elastic: the other 2 ranks keep running"), std::string::npos) << result.err;
  EXPECT_GE(result.seconds, 1.8) << "the survivors were stopped before they finished";
  for (int r : {0, 2}) EXPECT_TRUE(recorded_signals(dir.path(), r).empty()) << "rank " << r;
}

// --elastic --replace 1: the killed rank is started again with its environment and KOLO_JOIN=1
// (the probe's replacement records that and then behaves), once; the job succeeds.
TEST(KolorunFailure, ElasticReplaceStartsTheLostRankAgainToJoin) {
  TempDir dir;
  std::vector<std::string> args = elastic(worker(dir.path(), 3, {"--kill-rank", "1", "--signal", std::to_string(SIGKILL), "--sleep", "1.5"}));
  args.insert(args.begin(), {"--replace", "1"});
  ProcessResult result = run_kolorun(args, {{"KOLO_LAUNCH_GRACE", "0.2"}});
  EXPECT_EQ(result.exit_code(), 0) << result.err;
  std::ifstream joined(dir.path() + "/1.joined");
  std::string pid;
  ASSERT_TRUE(std::getline(joined, pid)) << "no replacement of rank 1 ran with KOLO_JOIN=1\n" << result.err;
  EXPECT_NE(result.err.find("--replace: started a replacement for rank 1 (pid " + pid + ", KOLO_JOIN=1; 1 of at most 1)"),
            std::string::npos)
      << result.err;
  for (int r : {0, 2}) EXPECT_FALSE(std::ifstream(dir.path() + "/" + std::to_string(r) + ".joined")) << "rank " << r;
}

// The same across "hosts" (a launch agent that runs the command here with nothing of kolorun's
// environment, as ssh would: `env -i`, naming the host in a variable): with --store-addr kolorun serves the store, every rank is told where, and the
// replacement's agent command carries KOLO_JOIN=1 among its variables.
TEST(KolorunFailure, ElasticReplaceAcrossHostsJoinsThroughTheStoreKolorunServes) {
  TempDir dir;
  std::vector<std::string> args = {"--elastic", "--replace", "1", "--store-addr", "127.0.0.1", "--hosts", "a:2,b:1",
                                   "--launch-agent", "env -i KOLO_TEST_HOST={host}", probe_path("KOLO_PROBE_WORKER"),
                                   dir.path(), "--kill-rank", "2", "--signal", std::to_string(SIGKILL), "--sleep", "1.5"};
  ProcessResult result = run_kolorun(args, {{"KOLO_LAUNCH_GRACE", "0.2"}});
  EXPECT_EQ(result.exit_code(), 0) << result.err;
  std::ifstream joined(dir.path() + "/2.joined");
  std::string pid;
  ASSERT_TRUE(std::getline(joined, pid)) << "no replacement of rank 2 ran with KOLO_JOIN=1\n" << result.err;
  std::string first_store;
  for (int r : {0, 1, 2}) {
    std::ifstream store(dir.path() + "/" + std::to_string(r) + ".store");
    std::string addr;
    ASSERT_TRUE(std::getline(store, addr)) << "rank " << r << " got no KOLO_STORE_ADDR\n" << result.err;
    EXPECT_EQ(addr.rfind("127.0.0.1:", 0), 0u) << "rank " << r << ": " << addr;
    if (r == 0) first_store = addr;
    EXPECT_EQ(addr, first_store) << "rank " << r;
  }
  for (int r : {0, 1}) EXPECT_FALSE(std::ifstream(dir.path() + "/" + std::to_string(r) + ".joined")) << "rank " << r;
  EXPECT_EQ(result.err.find("rank 0 serves the store"), std::string::npos) << result.err;
}

// Without --store-addr, --elastic across hosts says that rank 0's loss ends every shrink.
TEST(KolorunFailure, ElasticAcrossHostsWithoutStoreAddrSaysRankZeroServesTheStore) {
  TempDir dir;
  std::vector<std::string> args = {"--elastic", "--hosts", "a:1,b:1", "--launch-agent", "env KOLO_TEST_HOST={host}",
                                   probe_path("KOLO_PROBE_WORKER"), dir.path(), "--sleep", "0"};
  ProcessResult result = run_kolorun(args, {});
  EXPECT_EQ(result.exit_code(), 0) << result.err;
  EXPECT_NE(result.err.find("--elastic with --hosts: rank 0 serves the store"), std::string::npos) << result.err;
  EXPECT_FALSE(std::ifstream(dir.path() + "/0.store")) << "rank 0 was given a store kolorun does not serve";
}

// --elastic still fails the job when a rank exits non-zero, without stopping the others.
TEST(KolorunFailure, ElasticFailsOnANonZeroExitWithoutStoppingTheOthers) {
  TempDir dir;
  ProcessResult result =
      run_kolorun(elastic(worker(dir.path(), 3, {"--fail-rank", "0", "--exit-code", "3", "--sleep", "1"})),
                  {{"KOLO_LAUNCH_GRACE", "0.2"}});
  EXPECT_EQ(result.exit_code(), 3) << result.err;
  EXPECT_GE(result.seconds, 0.9);
  for (int r : {1, 2}) EXPECT_TRUE(recorded_signals(dir.path(), r).empty()) << "rank " << r;
}

TEST(KolorunFailure, AllRanksSucceedingMeansSuccessAndSilence) {
  TempDir dir;
  ProcessResult result = run_kolorun(worker(dir.path(), 5, {"--sleep", "0"}));
  EXPECT_EQ(result.exit_code(), 0) << result.err;
  EXPECT_EQ(result.err, "");
  for (int r = 0; r < 5; ++r) EXPECT_GT(recorded_pid(dir.path(), r), 0) << "rank " << r << " never ran";
}

TEST(KolorunFailure, ProgramNotFoundIsReportedWithStatus127) {
  ProcessResult result = run_kolorun({"-n", "3", "kolorun-test-no-such-program"});
  EXPECT_EQ(result.exit_code(), 127) << result.err;
  EXPECT_EQ(first_kolorun_line(result.err),
            "kolorun: cannot execute 'kolorun-test-no-such-program': No such file or directory");
  EXPECT_LT(result.seconds, 5.0);
}

TEST(KolorunFailure, ProgramNotExecutableIsReportedWithStatus126) {
  TempDir dir;
  const std::string script = dir.path() + "/not-executable";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  ::chmod(script.c_str(), 0644);
  ProcessResult result = run_kolorun({"-n", "2", script});
  EXPECT_EQ(result.exit_code(), 126) << result.err;
  EXPECT_EQ(first_kolorun_line(result.err), "kolorun: cannot execute '" + script + "': Permission denied");
}

TEST(KolorunFailure, TimeoutStopsTheWholeJob) {
  TempDir dir;
  std::vector<std::string> args{"--timeout", "1"};
  for (const std::string& a : worker(dir.path(), 2, {})) args.push_back(a);
  ProcessResult result = run_kolorun(args);
  EXPECT_EQ(result.exit_code(), 124) << result.err;
  EXPECT_NE(first_kolorun_line(result.err).find("exceeded --timeout of 1 s"), std::string::npos) << result.err;
  EXPECT_GE(result.seconds, 1.0);
  EXPECT_LT(result.seconds, 6.0);
  for (int r : {0, 1}) EXPECT_EQ(recorded_signals(dir.path(), r), std::vector<int>{SIGTERM}) << "rank " << r;
}

}  // namespace
}  // namespace kolo::launcher::testing

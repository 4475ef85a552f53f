// Proves failures end in clear errors on every rank instead of hangs or silent wrong data:
//  - a rank SIGKILLed in the middle of an allreduce loop: every survivor exits with an error
//    naming rank 2, the collective ("allreduce") and its sequence number, within
//    KOLO_TIMEOUT (10 s) + 5 s of the kill;
//  - a rank SIGSTOPped: within KOLO_TIMEOUT (3 s) + a little, the survivors fail with errors
//    saying they timed out waiting for a (named) rank; the first to time out raises
//    TimeoutError, the others may learn it from its abort (carrying that text); that every
//    survivor blames the stopped rank itself is test_blame.cpp's;
//  - rank 0 calling broadcast while the others call allreduce, and an allreduce with a
//    different count on one rank: every rank fails (at the latest on its next call, since a
//    broadcast root only sends), and the MismatchError text names both collectives / counts;
//  - ranks started with different KOLO_SECRET values: joining fails on every rank, within
//    KOLO_TIMEOUT + a little, with an error saying the secret was refused.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <string>
#include <thread>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

bool mentions_sequence_number(const std::string& text) {
  return std::regex_search(text, std::regex(R"((#|seq(uence)?[ =:]*)[0-9]+)"));
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// Whether any rank's error text contains every one of `needles`.
bool some_rank_says(const WorldOutcome& o, std::initializer_list<const char*> needles) {
  for (const RankOutcome& r : o.ranks) {
    const std::string text = error_text(r);
    bool all = !text.empty();
    for (const char* n : needles) all = all && contains(text, n);
    if (all) return true;
  }
  return false;
}

// Every rank's error names the peer it came from; every MismatchError (and every abort that
// carries one) names both sides of the mismatch. A rank that learns of the failure only when
// its peer's connection closes may see just "connection to rank N closed".
void expect_clear_mismatch_errors(const WorldOutcome& o, std::initializer_list<const char*> both_sides) {
  for (const RankOutcome& r : o.ranks) {
    const std::string text = error_text(r);
    EXPECT_TRUE(std::regex_search(text, std::regex("rank [0-9]+"))) << "the error names no rank: " << r.describe();
    bool carries_mismatch = contains(error_kind(r), "MismatchError");
    for (const char* side : both_sides) carries_mismatch = carries_mismatch || contains(text, side);
    if (!carries_mismatch) continue;
    for (const char* side : both_sides)
      EXPECT_TRUE(contains(text, side)) << "the mismatch error does not name '" << side << "': " << r.describe();
  }
}

TEST(Faults, KilledRankFailsEverySurvivorWithAnErrorNamingIt) {
  constexpr double kKoloTimeout = 10;
  ProcessWorld world(worker_launch("allreduce-loop", 4, std::chrono::seconds(90), "10"));
  ASSERT_TRUE(world.wait_for_stdout(2, "loop started", std::chrono::seconds(30))) << world.wait().describe();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double killed_at = world.elapsed();
  world.send_signal(2, SIGKILL);
  const WorldOutcome outcome = world.wait();
  ASSERT_FALSE(outcome.deadline_hit) << outcome.describe();
  EXPECT_EQ(outcome.ranks[2].signal, SIGKILL) << outcome.describe();
  for (int r : {0, 1, 3}) {
    const RankOutcome& rank = outcome.ranks[static_cast<size_t>(r)];
    const std::string text = error_text(rank);
    EXPECT_TRUE(rank.exited && rank.exit_code == 2) << rank.describe();
    EXPECT_TRUE(contains(text, "rank 2")) << "rank " << r << "'s error does not name rank 2: " << rank.describe();
    EXPECT_TRUE(contains(text, "allreduce")) << "rank " << r << "'s error does not name the collective: " << rank.describe();
    EXPECT_TRUE(mentions_sequence_number(text)) << "rank " << r << "'s error has no sequence number: " << rank.describe();
    EXPECT_LE(rank.seconds - killed_at, kKoloTimeout + 5) << "rank " << r << " took too long to fail: " << rank.describe();
  }
}

TEST(Faults, StoppedRankMakesSurvivorsTimeOut) {
  constexpr double kKoloTimeout = 3;
  ProcessWorld world(worker_launch("allreduce-loop", 3, std::chrono::seconds(60), "3"));
  ASSERT_TRUE(world.wait_for_stdout(1, "loop started", std::chrono::seconds(30))) << world.wait().describe();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double stopped_at = world.elapsed();
  world.send_signal(1, SIGSTOP);
  // Wait for the survivors only, then kill the stopped rank (SIGKILL ends a stopped process).
  world.wait_for_exit({0, 2}, std::chrono::seconds(30));
  world.send_signal(1, SIGKILL);
  const WorldOutcome outcome = world.wait();
  bool some_timeout_error = false;
  for (int r : {0, 2}) {
    const RankOutcome& rank = outcome.ranks[static_cast<size_t>(r)];
    EXPECT_TRUE(rank.exited && rank.exit_code == 2) << rank.describe();
    const std::string text = error_text(rank);
    some_timeout_error = some_timeout_error || contains(error_kind(rank), "TimeoutError");
    EXPECT_TRUE(contains(text, "timed out")) << "rank " << r << "'s error does not say it timed out: " << rank.describe();
    // Each survivor names a rank (which one, the blame chain: test_blame.cpp).
    EXPECT_TRUE(std::regex_search(text, std::regex("rank [0-9]+"))) << "rank " << r << "'s error names no rank: " << rank.describe();
    EXPECT_LE(rank.seconds - stopped_at, kKoloTimeout + 4) << "rank " << r << " took too long to time out: " << rank.describe();
  }
  EXPECT_TRUE(some_timeout_error) << "no survivor raised a TimeoutError: " << outcome.describe();
}

TEST(Faults, BroadcastAgainstAllreduceIsAMismatchOnEveryRank) {
  const WorldOutcome outcome = run_world(worker_launch("mismatch-collective", 3, std::chrono::seconds(60), "20"));
  ASSERT_FALSE(outcome.deadline_hit) << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) {
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.describe();
    EXPECT_FALSE(error_text(r).empty()) << r.describe();
    EXPECT_FALSE(contains(r.err, "TimeoutError")) << "a mismatch must be detected, not waited out: " << r.describe();
  }
  EXPECT_TRUE(some_rank_says(outcome, {"broadcast", "allreduce"})) << outcome.describe();
  expect_clear_mismatch_errors(outcome, {"broadcast", "allreduce"});
  bool any_mismatch_error = false;
  for (const RankOutcome& r : outcome.ranks) any_mismatch_error = any_mismatch_error || contains(error_kind(r), "MismatchError");
  EXPECT_TRUE(any_mismatch_error) << outcome.describe();
}

TEST(Faults, AllreduceWithDifferentCountsIsAMismatchOnEveryRank) {
  const WorldOutcome outcome = run_world(worker_launch("mismatch-count", 3, std::chrono::seconds(60), "20"));
  ASSERT_FALSE(outcome.deadline_hit) << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) {
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.describe();
    EXPECT_FALSE(error_text(r).empty()) << r.describe();
    EXPECT_FALSE(contains(r.err, "TimeoutError")) << "a mismatch must be detected, not waited out: " << r.describe();
  }
  EXPECT_TRUE(some_rank_says(outcome, {"1000", "1001"})) << outcome.describe();
  expect_clear_mismatch_errors(outcome, {"1000", "1001"});
  bool any_mismatch_error = false;
  for (const RankOutcome& r : outcome.ranks) any_mismatch_error = any_mismatch_error || contains(error_kind(r), "MismatchError");
  EXPECT_TRUE(any_mismatch_error) << outcome.describe();
}

TEST(Faults, DifferentSecretsAreRefusedWithoutHanging) {
  constexpr double kKoloTimeout = 5;
  LaunchSpec spec = worker_launch("join", 3, std::chrono::seconds(60), "5");
  spec.rank_env = [](int rank) { return Env{{"KOLO_SECRET", rank == 0 ? "secret-of-rank-zero" : "another-secret"}}; };
  const WorldOutcome outcome = run_world(spec);
  ASSERT_FALSE(outcome.deadline_hit) << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) {
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.describe();
    EXPECT_TRUE(contains(error_text(r), "secret")) << "the error does not say the secret was refused: " << r.describe();
    EXPECT_LE(r.seconds, kKoloTimeout + 5) << r.describe();
  }
}

TEST(Faults, SameSecretJoins) {
  LaunchSpec spec = worker_launch("join", 3, std::chrono::seconds(60), "15");
  spec.env["KOLO_SECRET"] = "shared-secret";
  const WorldOutcome outcome = run_world(spec);
  EXPECT_TRUE(outcome.all_succeeded()) << outcome.describe();
}

}  // namespace
}  // namespace kolo::coltest

// Kill and stop trials: each trial starts a job of 2-4 ranks (tcp or shm, drawn at random)
// running random validated collectives of random sizes (scenario "random"), and at a random
// moment SIGKILLs, or SIGSTOPs, a random rank. Every trial must end with
//  - no hang: every survivor exits before the launch deadline;
//  - no crash: every survivor exits with status 2 (a kolo error), none by a signal, none with
//    status 1 (a wrong element) or 4 (a non-kolo exception); the victim ends by our signal;
//  - SIGKILL: every survivor's error names the dead rank ("rank V"), a collective and its
//    sequence number, raised within KOLO_TIMEOUT + 1 s of the kill;
//  - SIGSTOP: every survivor raises TimeoutError saying which rank it waited for, within
//    KOLO_TIMEOUT + the blame grace (1 s) + 1 s of the stop; how many trials had every survivor
//    name the stopped rank (the blame chain, engine/blame.hpp) is counted, not asserted: random
//    collectives put survivors in point-to-point waits and rooted collectives, and a stopped
//    rank 0 freezes the store (test_blame.cpp asserts it for a ring);
//  - nothing of the job left in /dev/shm.
// KOLO_CHAOS_TRIALS (default 5) sets the trials per signal, KOLO_CHAOS_SEED the seed (default:
// random, printed); scripts/check/chaos.sh runs the long series. Each trial prints one line.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

constexpr int kKillTimeout = 5;  // KOLO_TIMEOUT of the kill trials (a death is seen at once)
constexpr int kStopTimeout = 3;  // KOLO_TIMEOUT of the stop trials (only the deadline sees it)
constexpr double kBlameGrace = 1;  // KOLO_BLAME_GRACE (default): a timed-out rank settles whom to blame

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::stoull(v) : fallback;
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

bool names_collective_and_sequence(const std::string& text) {
  return std::regex_search(text, std::regex(R"((broadcast|allreduce|reduce|allgather|gather|scatter|reduce_scatter|alltoall|alltoallv|barrier|send|recv)[a-z_]* #[0-9]+)"));
}

size_t shm_entries_of(const std::string& job) {
  size_t n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (const dirent* e = readdir(d))
      if (std::string(e->d_name).find(job) != std::string::npos) ++n;
    closedir(d);
  }
  return n;
}

struct Trial {
  int index;
  int world;
  std::string transport;
  uint64_t seed;
  int victim;
  int delay_ms;
  std::string describe() const {
    return "trial " + std::to_string(index) + " (" + std::to_string(world) + " ranks, " + transport + ", seed " +
           std::to_string(seed) + ", victim rank " + std::to_string(victim) + " after " + std::to_string(delay_ms) + " ms)";
  }
};

Trial draw_trial(std::mt19937_64& rng, int index) {
  Trial t;
  t.index = index;
  t.world = std::uniform_int_distribution<int>(2, 4)(rng);
  t.transport = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? "tcp" : "shm";
  t.seed = rng();
  t.victim = std::uniform_int_distribution<int>(0, t.world - 1)(rng);
  t.delay_ms = std::uniform_int_distribution<int>(0, 1500)(rng);
  return t;
}

// Runs one trial with `sig`; returns whether every check held (failures are also EXPECTed).
bool run_trial(const Trial& t, int sig, uint64_t& victim_named_count) {
  const int timeout = sig == SIGKILL ? kKillTimeout : kStopTimeout;
  LaunchSpec spec = worker_launch("random", t.world, std::chrono::seconds(90), std::to_string(timeout));
  spec.args = {"random", std::to_string(t.seed), "0", std::to_string(size_t{1} << 20)};
  spec.env["KOLO_TRANSPORT"] = t.transport;
  const std::string job = "chaos" + std::to_string(getpid()) + "t" + std::to_string(t.index);
  spec.env["KOLO_JOB_ID"] = job;
  ProcessWorld world(spec);
  for (int r = 0; r < t.world; ++r) {
    if (!world.wait_for_stdout(r, "loop started", std::chrono::seconds(60))) {
      ADD_FAILURE() << t.describe() << ": rank " << r << " never started: " << world.wait().describe();
      return false;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(t.delay_ms));
  const auto hit_at = std::chrono::steady_clock::now();
  world.send_signal(t.victim, sig);
  std::vector<int> survivors;
  for (int r = 0; r < t.world; ++r)
    if (r != t.victim) survivors.push_back(r);
  if (sig == SIGSTOP) {
    world.wait_for_exit(survivors, std::chrono::seconds(60));
    world.send_signal(t.victim, SIGKILL);  // ends a stopped process
  }
  const WorldOutcome o = world.wait();
  const std::string victim_name = "rank " + std::to_string(t.victim);
  const size_t failures_before = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
  EXPECT_FALSE(o.deadline_hit) << t.describe() << ": a hang: " << o.describe();
  const RankOutcome& v = o.ranks[static_cast<size_t>(t.victim)];
  EXPECT_TRUE(!v.exited && v.signal == SIGKILL) << t.describe() << ": the victim did not end by our signal: " << v.describe();
  bool victim_named = sig == SIGSTOP;
  double slowest = 0;
  for (int r : survivors) {
    const RankOutcome& s = o.ranks[static_cast<size_t>(r)];
    const std::string text = error_text(s);
    const double raised = seconds_after(s, hit_at);
    slowest = std::max(slowest, raised);
    EXPECT_TRUE(s.exited && s.exit_code == 2) << t.describe() << ": survivor crashed or failed otherwise: " << s.describe();
    EXPECT_LE(raised, timeout + (sig == SIGSTOP ? kBlameGrace : 0) + 1.0) << t.describe() << ": survivor " << r << " raised too late: " << s.describe();
    if (sig == SIGKILL) {
      EXPECT_TRUE(contains(text, victim_name)) << t.describe() << ": survivor " << r << " does not name " << victim_name << ": " << s.describe();
      EXPECT_TRUE(names_collective_and_sequence(text)) << t.describe() << ": survivor " << r << " names no collective #seq: " << s.describe();
    } else {
      EXPECT_EQ(error_kind(s).rfind("TimeoutError", 0), 0u) << t.describe() << ": survivor " << r << " did not raise TimeoutError: " << s.describe();
      EXPECT_TRUE(contains(text, "timed out")) << t.describe() << ": survivor " << r << " does not say it timed out: " << s.describe();
      EXPECT_TRUE(std::regex_search(text, std::regex("waiting for rank [0-9]+"))) << t.describe() << ": survivor " << r << " names no rank: " << s.describe();
      // Counted in the summary line, not asserted (see the top).
      victim_named = victim_named && error_kind(s) == "TimeoutError(peer " + std::to_string(t.victim) + ")";
    }
  }
  if (sig == SIGKILL || victim_named) ++victim_named_count;
  EXPECT_EQ(shm_entries_of(job), 0u) << t.describe() << ": /dev/shm entries of the job left behind";
  const bool ok = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() == failures_before;
  // One line per trial, for the record (scripts/check/chaos.sh keeps them).
  std::string first_error;
  if (!survivors.empty()) first_error = error_line(o.ranks[static_cast<size_t>(survivors.front())]);
  std::printf("chaos %s %s: %s, last survivor raised %.3f s after the signal%s; %s\n", sig == SIGKILL ? "SIGKILL" : "SIGSTOP",
              t.describe().c_str(), ok ? "ok" : "FAILED", slowest,
              sig == SIGKILL ? "" : victim_named ? ", every survivor blamed the victim" : ", NOT every survivor blamed the victim",
              first_error.c_str());
  std::fflush(stdout);
  return ok;
}

void run_series(int sig) {
  const uint64_t trials = env_u64("KOLO_CHAOS_TRIALS", 5);
  const uint64_t seed = env_u64("KOLO_CHAOS_SEED", std::random_device{}());
  std::printf("chaos %s: %llu trials, KOLO_CHAOS_SEED=%llu\n", sig == SIGKILL ? "SIGKILL" : "SIGSTOP",
              static_cast<unsigned long long>(trials), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed + static_cast<uint64_t>(sig));
  uint64_t passed = 0;
  uint64_t named = 0;
  for (uint64_t i = 0; i < trials; ++i) passed += run_trial(draw_trial(rng, static_cast<int>(i)), sig, named) ? 1 : 0;
  std::printf("chaos %s: %llu of %llu trials passed", sig == SIGKILL ? "SIGKILL" : "SIGSTOP",
              static_cast<unsigned long long>(passed), static_cast<unsigned long long>(trials));
  if (sig == SIGSTOP)
    std::printf("; in %llu of them every survivor's TimeoutError named the stopped rank",
                static_cast<unsigned long long>(named));
  std::printf("\n");
}

TEST(Chaos, KilledRankIsNamedByEverySurvivor) { run_series(SIGKILL); }

TEST(Chaos, StoppedRankMakesSurvivorsTimeOut) { run_series(SIGSTOP); }

}  // namespace
}  // namespace kolo::coltest

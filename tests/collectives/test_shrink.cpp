// ProcessGroup::shrink with real processes (scenario_shrink.cpp): 4 ranks, one SIGKILLed (rank 0
// included: the store lives in this driver, as kolorun hosts it, so it outlives every rank), the
// survivors shrink (whoever answers, or naming the dead rank) and check collectives element by
// element on the new group; the on-request form; a SIGSTOPped rank woken after the shrink is
// refused with ExcludedError; traffic in flight when the old group dies stays in it although the
// survivors keep their connections (and they do keep them: no socket opened); and under kolorun --elastic, rank 0 dies and the others finish,
// through the store kolorun hosts. Every launch is bounded (ProcessWorld's deadline).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include "driver_support.hpp"
#include "kolo/store.hpp"

namespace kolo::coltest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A launch of 4 workers in `mode` against a store this driver hosts.
struct Job {
  std::unique_ptr<TCPStoreServer> store = TCPStoreServer::start("127.0.0.1", 0);
  LaunchSpec spec;
  Job(const std::string& mode, int victim, const std::string& transport, const std::string& kolo_timeout = "10") {
    spec = worker_launch("shrink", 4, seconds(60), kolo_timeout);
    spec.args = {"shrink", mode, std::to_string(victim), "7"};
    spec.env["KOLO_TRANSPORT"] = transport;
    spec.env["KOLO_STORE_ADDR"] = "127.0.0.1:" + std::to_string(store->port());
  }
};

void wait_started(ProcessWorld& world, int ranks) {
  for (int r = 0; r < ranks; ++r)
    ASSERT_TRUE(world.wait_for_stdout(r, "loop started", seconds(30))) << "rank " << r << " never started";
}

// Each survivor ended well, shrank to generation 1 with its rank in old-rank order, and its
// checks passed; the victim ended by `sig`.
void expect_shrunk(const WorldOutcome& o, int victim, int sig) {
  if (std::getenv("KOLO_SHRINK_VERBOSE") != nullptr) std::printf("%s\n", o.describe().c_str());
  EXPECT_FALSE(o.deadline_hit) << "a hang: " << o.describe();
  for (const RankOutcome& r : o.ranks) {
    if (r.rank == victim) {
      if (sig != 0) {
        EXPECT_TRUE(!r.exited && r.signal == sig) << r.describe();
      }
      continue;
    }
    EXPECT_TRUE(r.succeeded()) << r.describe();
    const int want = r.rank - (r.rank > victim ? 1 : 0);
    EXPECT_TRUE(contains(r.out, "shrunk: generation 1 rank " + std::to_string(want) + " of 3 (was " + std::to_string(r.rank) + ")"))
        << r.describe();
  }
}

void kill_and_shrink(const std::string& mode, int victim, const std::string& transport) {
  Job job(mode, victim, transport);
  ProcessWorld world(job.spec);
  wait_started(world, 4);
  std::this_thread::sleep_for(milliseconds(50));
  world.send_signal(victim, SIGKILL);
  const WorldOutcome o = world.wait();
  expect_shrunk(o, victim, SIGKILL);
  for (const RankOutcome& r : o.ranks) {
    if (r.rank == victim) continue;
    // The old group's error named the dead rank.
    EXPECT_TRUE(contains(r.out, "old group failed: ") && contains(r.out, "rank " + std::to_string(victim))) << r.describe();
    // Nobody waited out the shrink's 5 s for the dead rank: the survivors reported it lost.
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex("; ([0-9]+) ms after the failure"))) << r.describe();
    EXPECT_LT(std::stoi(m[1]), 2500) << r.describe();
  }
}

TEST(Shrink, KilledRankTcp) { kill_and_shrink("kill", 2, "tcp"); }
TEST(Shrink, KilledRankZeroShm) { kill_and_shrink("kill", 0, "shm"); }
TEST(Shrink, KilledRankNamedShm) { kill_and_shrink("named", 3, "shm"); }

// The sockets a survivor's shrink opened ("new sockets: N", scenario_shrink.cpp).
int new_sockets(const RankOutcome& r) {
  std::smatch m;
  return std::regex_search(r.out, m, std::regex("new sockets: ([0-9]+)")) ? std::stoi(m[1]) : -1;
}

// Traffic in flight both ways between the survivors when the victim dies (a 6 MiB message
// perhaps mid-transfer, a 1 MiB one nobody receives, a receive nobody answers): the shrunk
// group's collectives and point-to-point messages with the old ones' tags and sizes are checked
// element by element, so a byte of the old group crossing a kept connection fails it. Over shm
// every connection between survivors is kept (no new socket); over tcp one whose frame the
// abort cut off is connected anew, the others kept.
void inflight_and_shrink(const std::string& transport, int victim, uint64_t seed) {
  Job job("inflight", victim, transport);
  job.spec.args[3] = std::to_string(seed);
  ProcessWorld world(job.spec);
  const WorldOutcome o = world.wait();
  expect_shrunk(o, victim, SIGKILL);
  for (const RankOutcome& r : o.ranks) {
    if (r.rank == victim) continue;
    EXPECT_TRUE(contains(r.out, "old group failed: ")) << r.describe();
    if (transport == "shm") EXPECT_EQ(new_sockets(r), 0) << r.describe();
    else EXPECT_GE(new_sockets(r), 0) << r.describe();
  }
}

TEST(Shrink, InFlightTrafficStaysInTheOldGroupShm) {
  for (uint64_t seed : {0, 700, 2100}) inflight_and_shrink("shm", 1, seed);
}
TEST(Shrink, InFlightTrafficStaysInTheOldGroupTcp) {
  for (uint64_t seed : {0, 700, 2100}) inflight_and_shrink("tcp", 2, seed);
}

// Proof that the survivors keep their connections: shrink({1}) of a healthy group (a receive
// in flight) opens no socket over tcp or shm; with KOLO_SHRINK_REUSE=0 each survivor opens one
// per other survivor (which is what the count would show if the connections were remade).
void sockets_opened_by_shrink(const std::string& transport, const std::string& reuse, int want_min, int want_max) {
  Job job("request", 1, transport);
  job.spec.env["KOLO_SHRINK_REUSE"] = reuse;
  ProcessWorld world(job.spec);
  const WorldOutcome o = world.wait();
  expect_shrunk(o, 1, 0);
  for (const RankOutcome& r : o.ranks) {
    if (r.rank == 1) continue;
    const int n = new_sockets(r);
    EXPECT_TRUE(n >= want_min && n <= want_max) << transport << ", KOLO_SHRINK_REUSE=" << reuse << ": " << n
                                                << " new socket(s); " << r.describe();
  }
}

TEST(Shrink, SurvivorsKeepTheirConnections) {
  for (const char* transport : {"tcp", "shm"}) {
    sockets_opened_by_shrink(transport, "1", 0, 0);
    sockets_opened_by_shrink(transport, "0", 2, 100);
  }
}

// A group made by a shrink shrinks again: the connections its members kept are handed over a
// second time (no socket opened), and both generations compute exactly.
TEST(Shrink, TwiceKeepsTheConnectionsAgain) {
  for (const char* transport : {"tcp", "shm"}) {
    Job job("twice", 1, transport);
    ProcessWorld world(job.spec);
    const WorldOutcome o = world.wait();
    expect_shrunk(o, 1, 0);
    for (int r : {0, 2}) {
      const RankOutcome& x = o.ranks[static_cast<size_t>(r)];
      EXPECT_TRUE(contains(x.out, "twice: generation 2 rank " + std::to_string(r == 0 ? 0 : 1) + " of 2; new sockets: 0"))
          << transport << ": " << x.describe();
    }
    EXPECT_TRUE(contains(o.ranks[3].out, "excluded the second time")) << transport << ": " << o.ranks[3].describe();
  }
}

TEST(Shrink, OnRequest) {
  Job job("request", 1, "tcp");
  ProcessWorld world(job.spec);
  const WorldOutcome o = world.wait();
  expect_shrunk(o, 1, 0);
  EXPECT_TRUE(o.ranks[1].succeeded() && contains(o.ranks[1].out, "excluded as asked")) << o.ranks[1].describe();
  for (const RankOutcome& r : o.ranks)  // shrink aborted the old group under it
    EXPECT_TRUE(contains(r.out, "in-flight receive ended: ") && contains(r.out, "shrinking to generation 1")) << r.describe();
}

// Shrinking from a completion callback of an operation the old group's failure ended: the
// callback runs on the engine thread while it fails the group, and the shrink must neither wait
// for that thread (a hang) nor leave the others waiting for this rank's offer.
TEST(Shrink, FromACompletionCallback) {
  for (const char* transport : {"tcp", "shm"}) {
    Job job("callback", 1, transport);
    job.spec.deadline = seconds(40);
    ProcessWorld world(job.spec);
    const WorldOutcome o = world.wait();
    expect_shrunk(o, 1, 0);
  }
}

// The stopped rank's peers time out (KOLO_TIMEOUT 2 s), shrink without it and finish; woken
// only then, its own shrink must refuse it, not hang or join (over shm too: the survivors keep
// their connections to each other, never theirs to it).
void stopped_rank_is_refused(const std::string& transport) {
  const int victim = 1;
  Job job("stop", victim, transport, "2");
  job.spec.env["KOLO_SHRINK_TEST_MS"] = "3000";
  ProcessWorld world(job.spec);
  wait_started(world, 4);
  world.send_signal(victim, SIGSTOP);
  const bool survivors_done = world.wait_for_exit({0, 2, 3}, seconds(30));
  world.send_signal(victim, SIGCONT);
  const WorldOutcome o = world.wait();
  EXPECT_TRUE(survivors_done) << o.describe();
  expect_shrunk(o, victim, 0);
  const RankOutcome& v = o.ranks[victim];
  EXPECT_TRUE(v.succeeded() && contains(v.out, "refused: ") && contains(v.out, "excluded from generation 1")) << v.describe();
}

TEST(Shrink, StoppedRankIsRefusedAfterWaking) { stopped_rank_is_refused("tcp"); }
TEST(Shrink, StoppedRankIsRefusedAfterWakingShm) { stopped_rank_is_refused("shm"); }

// kolorun hosts the store (no KOLO_STORE_ADDR from here): rank 0 kills itself before its 5th
// collective, and with --elastic the other three shrink, check and exit 0, and so does kolorun.
TEST(Shrink, KolorunElasticSurvivesRankZero) {
  const std::string kolorun = binary_path("KOLORUN", "../../tools/kolorun/kolorun");
  LaunchSpec spec;
  spec.program = kolorun;
  spec.args = {"--elastic", "-n", "4", worker_binary(), "shrink", "kill", "0", "7", "5"};
  spec.world_size = 1;
  spec.deadline = seconds(60);
  spec.env["KOLO_TIMEOUT"] = "10";
  spec.env["KOLO_SPIN_US"] = "0";
  spec.env["KOLO_TRANSPORT"] = "shm";
  ProcessWorld world(spec);
  const WorldOutcome o = world.wait();
  const RankOutcome& k = o.ranks[0];
  EXPECT_FALSE(o.deadline_hit) << o.describe();
  EXPECT_TRUE(k.succeeded()) << k.describe();
  for (int r = 1; r < 4; ++r)
    EXPECT_TRUE(contains(k.out, "rank " + std::to_string(r - 1) + " of 3 (was " + std::to_string(r) + ")")) << k.describe();
  EXPECT_TRUE(contains(k.err, "--elastic: the other 3 ranks keep running")) << k.describe();
}

// Random kill trials (scripts/check/shrink_trials.sh runs the long series; CI runs
// KOLO_SHRINK_TRIALS, default 2): 4 ranks over shm or tcp (drawn), random collectives of random
// sizes (drawn seed), a random rank SIGKILLed 0-1000 ms after every rank has run one. Every
// survivor must end in generation 1 with its rank in old-rank order and every element checked
// (expect_shrunk); the victim by our signal; nothing hangs. Each trial prints the time from the
// kill until the last survivor had finished its first collective on the shrunk group, and the
// summary prints their median and worst.
TEST(Shrink, RandomKillTrials) {
  const char* n_text = std::getenv("KOLO_SHRINK_TRIALS");
  const char* seed_text = std::getenv("KOLO_SHRINK_SEED");
  const int trials = n_text != nullptr && *n_text != '\0' ? std::atoi(n_text) : 2;
  const uint64_t seed = seed_text != nullptr && *seed_text != '\0' ? std::stoull(seed_text) : std::random_device{}();
  std::printf("shrink trials: %d, KOLO_SHRINK_SEED=%llu\n", trials, static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::vector<double> times[2], fresh_times[2];  // per transport: shm, tcp
  int passed = 0;
  for (int t = 0; t < trials; ++t) {
    const bool tcp = rng() % 2 == 1;
    const int victim = static_cast<int>(rng() % 4);
    const uint64_t job_seed = rng();
    const int delay_ms = static_cast<int>(rng() % 1001);
    const std::string transport = tcp ? "tcp" : "shm";
    char what[160];
    std::snprintf(what, sizeof what, "trial %d (%s, seed %llu, victim rank %d after %d ms)", t, transport.c_str(),
                  static_cast<unsigned long long>(job_seed), victim, delay_ms);
    SCOPED_TRACE(what);
    const int failures_before = ::testing::UnitTest::GetInstance()->failed_test_count() +
                                static_cast<int>(::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count());
    Job job("kill", victim, transport);
    job.spec.args[3] = std::to_string(job_seed);
    ProcessWorld world(job.spec);
    wait_started(world, 4);
    std::this_thread::sleep_for(milliseconds(delay_ms));
    const auto killed_at = std::chrono::steady_clock::now();
    world.send_signal(victim, SIGKILL);
    const WorldOutcome o = world.wait();
    expect_shrunk(o, victim, SIGKILL);
    double last = -1;
    for (const RankOutcome& r : o.ranks) {
      std::smatch m;
      if (r.rank == victim || !std::regex_search(r.out, m, std::regex("first collective done at ([0-9]+)"))) continue;
      const std::chrono::steady_clock::time_point done{std::chrono::nanoseconds(std::stoll(m[1]))};
      last = std::max(last, std::chrono::duration<double>(done - killed_at).count());
    }
    // The peer, in the same trial: a fresh 3-rank job of the same transport, from launch until
    // every rank has finished its first collective (a restart costs at least that).
    double fresh = -1;
    {
      Job peer("fresh", -1, transport);
      peer.spec.world_size = 3;
      const auto launched_at = std::chrono::steady_clock::now();
      ProcessWorld fresh_world(peer.spec);
      const WorldOutcome f = fresh_world.wait();
      EXPECT_TRUE(f.all_succeeded()) << f.describe();
      for (const RankOutcome& r : f.ranks) {
        std::smatch m;
        if (!std::regex_search(r.out, m, std::regex("first collective done at ([0-9]+)"))) continue;
        const std::chrono::steady_clock::time_point done{std::chrono::nanoseconds(std::stoll(m[1]))};
        fresh = std::max(fresh, std::chrono::duration<double>(done - launched_at).count());
      }
    }
    const bool ok = static_cast<int>(::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count()) +
                        ::testing::UnitTest::GetInstance()->failed_test_count() == failures_before;
    if (ok) {
      ++passed;
      times[tcp ? 1 : 0].push_back(last);
      fresh_times[tcp ? 1 : 0].push_back(fresh);
    }
    std::printf("shrink %s: %s, kill to the first collective on the shrunk group (last survivor): %.3f s; "
                "a fresh 3-rank job, launch to its first collective: %.3f s\n",
                what, ok ? "ok" : "FAILED", last, fresh);
    std::fflush(stdout);
  }
  std::printf("shrink trials: %d of %d passed", passed, trials);
  for (int k = 0; k < 2; ++k) {
    std::vector<double>& v = times[k];
    std::vector<double>& f = fresh_times[k];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    std::sort(f.begin(), f.end());
    std::printf("; %s: %zu trials, kill to first collective median %.3f s, worst %.3f s (a fresh 3-rank job's launch "
                "to first collective: median %.3f s, %.1fx the shrink's)",
                k ? "tcp" : "shm", v.size(), v[v.size() / 2], v.back(), f[f.size() / 2], f[f.size() / 2] / v[v.size() / 2]);
  }
  std::printf("\n");
}

}  // namespace
}  // namespace kolo::coltest

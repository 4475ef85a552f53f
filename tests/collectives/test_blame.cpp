// The blame chain across processes (src/engine/blame.hpp). Four ranks run a loop of 1 MiB ring
// all-reduces, so every rank waits for a neighbour (to receive from the left one, or, when a
// shared-memory ring is full, to send to the right one); one rank is SIGSTOPped:
//  - rank 2 stopped: rank 0, which is not next to it, waits for rank 1 or 3. Every survivor
//    must raise TimeoutError with peer_rank() 2, its text naming rank 2 as the rank that did not
//    report and the collective with its sequence number, within KOLO_TIMEOUT + the grace + 1 s
//    of the stop; over shm and over tcp.
//  - rank 0 stopped: rank 0 also serves the store (init_from_env), so the exchange cannot
//    happen. Every survivor must still raise TimeoutError (naming the rank it waited for) within
//    KOLO_TIMEOUT + the grace + 1 s: a frozen store costs the grace, not a hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

constexpr int kTimeout = 3;        // KOLO_TIMEOUT
constexpr double kGrace = 1.0;     // KOLO_BLAME_GRACE, set explicitly below
constexpr int kWorld = 4;
const std::string kOneMiBOfFloats = std::to_string(256 * 1024);

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// Runs the ring loop, stops `victim` once every rank has finished one all-reduce, and returns
// the outcome with the survivors' raise times (seconds after the stop) in `raised`.
WorldOutcome stop_one_of_a_ring(int victim, const std::string& transport, std::vector<double>* raised) {
  LaunchSpec spec = worker_launch("allreduce-loop", kWorld, std::chrono::seconds(60), std::to_string(kTimeout));
  spec.args.push_back(kOneMiBOfFloats);
  spec.env["KOLO_ALGO"] = "allreduce=ring";
  spec.env["KOLO_TRANSPORT"] = transport;
  spec.env["KOLO_BLAME_GRACE"] = std::to_string(static_cast<int>(kGrace * 1000));
  ProcessWorld world(spec);
  for (int r = 0; r < kWorld; ++r) {
    if (!world.wait_for_stdout(r, "loop started", std::chrono::seconds(30))) {
      ADD_FAILURE() << "rank " << r << " never started";
      return world.wait();
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto stopped_at = std::chrono::steady_clock::now();
  world.send_signal(victim, SIGSTOP);
  std::vector<int> survivors;
  for (int r = 0; r < kWorld; ++r)
    if (r != victim) survivors.push_back(r);
  world.wait_for_exit(survivors, std::chrono::seconds(30));
  world.send_signal(victim, SIGKILL);  // ends a stopped process
  WorldOutcome o = world.wait();
  raised->assign(kWorld, 0);
  for (int r : survivors) {
    const RankOutcome& s = o.ranks[static_cast<size_t>(r)];
    (*raised)[static_cast<size_t>(r)] = seconds_after(s, stopped_at);
    // For the record (docs/RELIABILITY.md quotes these lines).
    std::printf("%s: raised %.3f s after the stop: %s\n", transport.c_str(), (*raised)[static_cast<size_t>(r)],
                error_line(s).c_str());
  }
  std::fflush(stdout);
  return o;
}

void every_survivor_names_the_stopped_rank(const std::string& transport) {
  constexpr int kVictim = 2;
  std::vector<double> raised;
  const WorldOutcome o = stop_one_of_a_ring(kVictim, transport, &raised);
  ASSERT_FALSE(o.deadline_hit) << o.describe();
  for (int r = 0; r < kWorld; ++r) {
    if (r == kVictim) continue;
    const RankOutcome& s = o.ranks[static_cast<size_t>(r)];
    const std::string text = error_text(s);
    EXPECT_TRUE(s.exited && s.exit_code == 2) << s.describe();
    EXPECT_EQ(error_kind(s), "TimeoutError(peer 2)") << "rank " << r << " blames another rank: " << s.describe();
    EXPECT_TRUE(contains(text, "rank 2 did not report")) << "rank " << r << "'s text does not name rank 2: " << s.describe();
    EXPECT_TRUE(std::regex_search(text, std::regex("allreduce #[0-9]+"))) << "no collective #seq: " << s.describe();
    EXPECT_LE(raised[static_cast<size_t>(r)], kTimeout + kGrace + 1.0) << "rank " << r << " raised too late: " << s.describe();
  }
  // Rank 0 is neither of rank 2's neighbours: it waited for rank 3 (its receive) or rank 1 (its
  // send, when the shm ring is full), so its error went along the chain to rank 2.
  EXPECT_TRUE(std::regex_search(error_text(o.ranks[0]), std::regex("waiting for rank [13] .*, which waits for rank 2; rank 2 did not report")))
      << o.ranks[0].describe();
}

TEST(Blame, StoppedRankIsNamedByEverySurvivorOfAShmRing) { every_survivor_names_the_stopped_rank("shm"); }

TEST(Blame, StoppedRankIsNamedByEverySurvivorOfATcpRing) { every_survivor_names_the_stopped_rank("tcp"); }

TEST(Blame, FrozenStoreDoesNotDelayTheErrorPastTheGrace) {
  std::vector<double> raised;
  const WorldOutcome o = stop_one_of_a_ring(0, "shm", &raised);
  ASSERT_FALSE(o.deadline_hit) << o.describe();
  for (int r = 1; r < kWorld; ++r) {
    const RankOutcome& s = o.ranks[static_cast<size_t>(r)];
    EXPECT_TRUE(s.exited && s.exit_code == 2) << s.describe();
    EXPECT_EQ(error_kind(s).rfind("TimeoutError", 0), 0u) << s.describe();
    // The store never answered: no chain, so each names the rank it waited for, as without one.
    std::smatch m;
    const std::string text = error_text(s);
    ASSERT_TRUE(std::regex_search(text, m, std::regex("waiting for rank ([0-9]+)"))) << s.describe();
    EXPECT_EQ(error_kind(s), "TimeoutError(peer " + m[1].str() + ")") << s.describe();
    EXPECT_FALSE(contains(text, "did not report")) << "a chain read from a frozen store: " << s.describe();
    EXPECT_LE(raised[static_cast<size_t>(r)], kTimeout + kGrace + 1.0) << "rank " << r << " raised too late: " << s.describe();
  }
  // Rank 1 waits for rank 0 itself: without the store it still names it.
  EXPECT_EQ(error_kind(o.ranks[1]), "TimeoutError(peer 0)") << o.ranks[1].describe();
}

}  // namespace
}  // namespace kolo::coltest

// Subgroups that share their parent's connections (SplitOptions.share_connections,
// KOLO_SPLIT_SHARE), in real processes over TCP and shared memory (scenario_split_share.cpp):
//  - 4 and 8 ranks split into 2 colors, and a sharing split of that: no new socket (counted in
//    each rank's /proc/self/fd), while every collective on the children, interleaved with world
//    collectives, matches the reference element by element; the same scenario with ordinary
//    splits opens a mesh per child (so the count can fail), and a non-sharing split of a sharing
//    child opens its own;
//  - parent and child issued in different orders on one rank: the affected ranks fail with a
//    MismatchError naming both groups and collectives, well within the timeout;
//  - a killed rank: every survivor, in the world's or its child's operation, fails naming it;
//  - ranks that disagree on sharing are refused with InvalidArgument, not left waiting.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <string>
#include <thread>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// The N of the line "<what> +N" a rank printed, or -1.
int printed_growth(const RankOutcome& r, const std::string& what) {
  std::smatch m;
  if (!std::regex_search(r.out, m, std::regex(what + " \\+([0-9]+)\n"))) return -1;
  return std::stoi(m[1]);
}

LaunchSpec split_launch(const std::string& mode, int world, const std::string& transport) {
  LaunchSpec spec = worker_launch("split-share", world, std::chrono::seconds(400));
  spec.args = {"split-share", mode, world > 4 ? "3" : "6"};
  spec.env["KOLO_TRANSPORT"] = transport;
  return spec;
}

void expect_sharing_world(const WorldOutcome& o, int world) {
  ASSERT_TRUE(o.all_succeeded()) << o.describe();
  ASSERT_EQ(o.ranks.size(), static_cast<size_t>(world));
  for (const RankOutcome& r : o.ranks) {
    EXPECT_EQ(printed_growth(r, "sockets split"), 0) << "a sharing split opened sockets: " << r.describe();
    EXPECT_EQ(printed_growth(r, "sockets nested"), 0) << "a nested sharing split opened sockets: " << r.describe();
    EXPECT_EQ(printed_growth(r, "sockets after"), 0) << "collectives on sharing splits opened sockets: " << r.describe();
    EXPECT_GE(printed_growth(r, "sockets fresh"), world / 2 - 1)
        << "a non-sharing split of a sharing child must connect anew: " << r.describe();
  }
}

}  // namespace

TEST(SplitShare, EightRanksTcpShareConnections) { expect_sharing_world(run_world(split_launch("share", 8, "tcp")), 8); }

TEST(SplitShare, FourRanksShmShareConnections) { expect_sharing_world(run_world(split_launch("share", 4, "shm")), 4); }

TEST(SplitShare, EightRanksShmShareConnections) { expect_sharing_world(run_world(split_launch("share", 8, "shm")), 8); }

TEST(SplitShare, FourRanksTcpShareByEnvironment) {
  LaunchSpec spec = split_launch("env", 4, "tcp");
  spec.env["KOLO_SPLIT_SHARE"] = "1";
  expect_sharing_world(run_world(spec), 4);
}

// The same scenario with ordinary splits: every child connects its members (eagerly: a mesh of
// world/2 - 1 connections per rank, plus listeners), which is what the counts above rule out.
TEST(SplitShare, EightRanksTcpOrdinarySplitsConnect) {
  const WorldOutcome o = run_world(split_launch("connect", 8, "tcp"));
  ASSERT_TRUE(o.all_succeeded()) << o.describe();
  for (const RankOutcome& r : o.ranks) {
    EXPECT_GE(printed_growth(r, "sockets split"), 3) << r.describe();
    EXPECT_GE(printed_growth(r, "sockets nested"), 6) << r.describe();
  }
}

// Ranks that disagree on sharing would split the color into ranks waiting for connections and
// ranks that never open them: every rank refuses at once instead.
TEST(SplitShare, DisagreeingRanksAreRefused) {
  const WorldOutcome o = run_world(worker_launch("split-share-disagree", 4, std::chrono::seconds(60), "20"));
  ASSERT_FALSE(o.deadline_hit) << o.describe();
  for (const RankOutcome& r : o.ranks) {
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.describe();
    EXPECT_EQ(error_kind(r), "InvalidArgument") << r.describe();
    EXPECT_TRUE(contains(error_text(r), "share_connections")) << r.describe();
    EXPECT_LT(r.seconds, 10.0) << r.describe();
  }
  EXPECT_TRUE(contains(error_text(o.ranks[0]), "rank(s) 1, 2, 3")) << o.ranks[0].describe();
  EXPECT_TRUE(contains(error_text(o.ranks[1]), "rank(s) 0 ")) << o.ranks[1].describe();
}

class SplitShareFaults : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitShareFaults, MisorderedParentAndChildFailNamingBothGroups) {
  LaunchSpec spec = worker_launch("split-share-misorder", 4, std::chrono::seconds(120), "20");
  spec.env["KOLO_TRANSPORT"] = GetParam();
  const WorldOutcome o = run_world(spec);
  ASSERT_FALSE(o.deadline_hit) << o.describe();
  for (const RankOutcome& r : o.ranks) EXPECT_TRUE(r.exited && r.exit_code == 2) << "no kolo error: " << r.describe();
  // World rank 0 (child rank 0 of color 0) and its child partner, world rank 2, each receive the
  // other group's message first.
  for (int rank : {0, 2}) {
    const RankOutcome& r = o.ranks[static_cast<size_t>(rank)];
    const std::string text = error_text(r);
    EXPECT_TRUE(contains(error_kind(r), "MismatchError")) << r.describe();
    EXPECT_TRUE(contains(text, "of group default/split0.color0")) << "the child is not named: " << r.describe();
    EXPECT_TRUE(contains(text, "of group default ") || contains(text, "of group default.")) << "the world is not named: " << r.describe();
    EXPECT_TRUE(contains(text, "allreduce #0") && contains(text, "alltoall #")) << "collectives or sequence numbers missing: " << r.describe();
    EXPECT_TRUE(contains(text, "same order")) << r.describe();
    EXPECT_LT(r.seconds, 15.0) << "failed by the timeout, not by the mismatch: " << r.describe();
  }
}

TEST_P(SplitShareFaults, KilledRankFailsWorldAndChildNamingIt) {
  constexpr int kWorld = 4, kVictim = 3;  // color 1, child rank 1
  ProcessWorld world([&] {
    LaunchSpec spec = worker_launch("split-share-kill", kWorld, std::chrono::seconds(90), "10");
    spec.env["KOLO_TRANSPORT"] = GetParam();
    return spec;
  }());
  ASSERT_TRUE(world.wait_for_stdout(kVictim, "loop started", std::chrono::seconds(40))) << world.wait().describe();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double killed_at = world.elapsed();
  world.send_signal(kVictim, SIGKILL);
  const WorldOutcome o = world.wait();
  ASSERT_FALSE(o.deadline_hit) << o.describe();
  EXPECT_EQ(o.ranks[kVictim].signal, SIGKILL) << o.describe();
  for (int rank : {0, 1, 2}) {
    const RankOutcome& r = o.ranks[static_cast<size_t>(rank)];
    const std::string text = error_text(r), kind = error_kind(r), line = error_line(r);
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.describe();
    EXPECT_TRUE(contains(text, "rank 3")) << "the error does not name the killed rank: " << r.describe();
    EXPECT_LE(r.seconds - killed_at, 10 + 5) << r.describe();
    if (contains(line, "[split-share-kill: world")) {
      EXPECT_TRUE(contains(kind, "(peer 3)")) << "the world names it as rank 3: " << r.describe();
    } else if (contains(line, "[split-share-kill: child") && rank % 2 == 1) {
      // In its own child (color 1: world ranks 1, 3) the killed rank is child rank 1.
      EXPECT_TRUE(contains(kind, "(peer 1)")) << "the child names it in its own ranks: " << r.describe();
      EXPECT_TRUE(contains(text, "rank 3 of group default")) << r.describe();
      EXPECT_TRUE(contains(text, "default/split0.color1")) << r.describe();
    } else {
      // A color-0 child does not contain it: no rank of its own to name, the parent's named.
      EXPECT_TRUE(contains(text, "default/split0.color0")) << r.describe();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, SplitShareFaults, ::testing::Values("tcp", "shm"));

}  // namespace kolo::coltest

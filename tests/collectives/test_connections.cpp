// Connections on demand (KOLO_CONNECT=lazy) in real processes over TCP: in an 8-rank job a ring
// all-reduce connects each rank to its 2 neighbours, not 7, and an all-to-all then opens the
// rest, one connection per pair (counted in each rank's /proc/self/fd); eagerly all 7 are open
// after joining. Creating a subgroup lazily opens its listening socket and no connection. A rank dead before anyone connected to it is named by every survivor's error,
// within seconds although KOLO_TIMEOUT is a minute; a rank stopped before anyone connected to it
// (its port accepts, nobody answers) makes every survivor time out within KOLO_TIMEOUT, one of
// them naming it.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

LaunchSpec sockets_launch(const std::string& mode, int world) {
  LaunchSpec spec = worker_launch("sockets", world, std::chrono::seconds(120));
  spec.env["KOLO_TRANSPORT"] = "tcp";
  spec.env["KOLO_CONNECT"] = mode;
  return spec;
}

}  // namespace

TEST(Connections, LazyRingConnectsTwoPeersAndAllToAllTheRest) {
  const WorldOutcome o = run_world(sockets_launch("lazy", 8));
  ASSERT_TRUE(o.all_succeeded()) << o.describe();
  for (const RankOutcome& r : o.ranks) {
    EXPECT_NE(r.out.find("sockets ring +2\n"), std::string::npos) << r.describe();
    EXPECT_NE(r.out.find("sockets alltoall +7\n"), std::string::npos) << r.describe();
    EXPECT_NE(r.out.find("sockets split +1\n"), std::string::npos) << "a lazy subgroup opens its listener only: " << r.describe();
  }
}

TEST(Connections, EagerOpensTheFullMeshWhileJoining) {
  const WorldOutcome o = run_world(sockets_launch("eager", 8));
  ASSERT_TRUE(o.all_succeeded()) << o.describe();
  for (const RankOutcome& r : o.ranks) {
    EXPECT_NE(r.out.find("sockets ring +0\n"), std::string::npos) << r.describe();
    EXPECT_NE(r.out.find("sockets alltoall +0\n"), std::string::npos) << r.describe();
    EXPECT_NE(r.out.find("sockets split +3\n"), std::string::npos) << "an eager subgroup of 4 opens its mesh: " << r.describe();
  }
}

TEST(Connections, RankDeadBeforeAnyConnectIsNamedBySurvivors) {
  LaunchSpec spec = worker_launch("dead-before-connect", 4, std::chrono::seconds(90), "60");
  spec.env["KOLO_TRANSPORT"] = "tcp";
  spec.env["KOLO_CONNECT"] = "lazy";
  const WorldOutcome o = run_world(spec);
  ASSERT_FALSE(o.deadline_hit) << o.describe();
  ASSERT_EQ(o.ranks.size(), 4u);
  EXPECT_TRUE(o.ranks[3].succeeded()) << o.ranks[3].describe();
  for (int r = 0; r < 3; ++r) {
    const RankOutcome& out = o.ranks[static_cast<size_t>(r)];
    EXPECT_FALSE(out.succeeded()) << out.describe();
    EXPECT_NE(error_text(out).find("rank 3"), std::string::npos) << "the error must name the dead rank: " << out.describe();
    EXPECT_LT(out.seconds, 30.0) << "failed by the timeout, not by finding the rank gone: " << out.describe();
  }
}

TEST(Connections, RankStoppedBeforeAnyConnectTimesOutNamed) {
  constexpr double kKoloTimeout = 3;
  LaunchSpec spec = worker_launch("dead-before-connect", 4, std::chrono::seconds(90), "3");
  spec.args = {"dead-before-connect", "stop"};
  spec.env["KOLO_TRANSPORT"] = "tcp";
  spec.env["KOLO_CONNECT"] = "lazy";
  ProcessWorld world(spec);
  ASSERT_TRUE(world.wait_for_stdout(3, "stopping before any connection", std::chrono::seconds(30))) << world.wait().describe();
  world.wait_for_exit({0, 1, 2}, std::chrono::seconds(60));
  world.send_signal(3, SIGKILL);
  const WorldOutcome o = world.wait();
  ASSERT_FALSE(o.deadline_hit) << o.describe();
  // As with a rank stopped mid-job (test_faults.cpp): every survivor times out within the
  // timeout, each naming the rank it waited for (they time out at about the same moment, so a
  // rank may name a neighbour that was itself waiting), and some survivor names rank 3.
  bool someone_names_it = false;
  for (int r = 0; r < 3; ++r) {
    const RankOutcome& out = o.ranks[static_cast<size_t>(r)];
    const std::string text = error_text(out);
    EXPECT_TRUE(out.exited && out.exit_code == 2) << out.describe();
    EXPECT_NE(text.find("timed out"), std::string::npos) << "rank " << r << " did not time out: " << out.describe();
    EXPECT_LT(out.seconds, kKoloTimeout + 10) << out.describe();
    someone_names_it |= text.find("waiting for rank 3") != std::string::npos;
  }
  EXPECT_TRUE(someone_names_it) << "no survivor names the stopped rank: " << o.describe();
}

}  // namespace kolo::coltest

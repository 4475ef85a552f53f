// The direct path (KOLO_DIRECT, src/engine/executor.cpp run_direct): small collectives that
// their issuing thread runs at once give exactly the engine's results, at 2 ranks (the two-rank
// exchange) and above (the algorithm on a direct EngineComm), when a late rank makes the others
// hand over, when a root runs far ahead, when two threads of a rank issue by turns, and when
// direct and engine-only ranks are mixed in one
// group, which only works if both put the same messages on the wire (scenario_direct.cpp).
#include <gtest/gtest.h>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

TEST(Direct, EveryRankDirectMatchesTheReference) {
  for (int world : {2, 3, 4}) {
    LaunchSpec spec = worker_launch("direct", world, std::chrono::seconds(180));
    spec.env["KOLO_DIRECT"] = "1";
    const WorldOutcome outcome = run_world(spec);
    expect_all_ok(outcome);
    // With a barrier behind it and its rings empty, a root's 8-byte broadcast goes out while
    // broadcast() runs: the Work it returns has completed.
    EXPECT_NE(outcome.ranks.at(0).out.find("ROOT BROADCAST COMPLETE AT ISSUE: yes"), std::string::npos)
        << outcome.ranks.at(0).describe();
  }
}

TEST(Direct, DirectAndEngineOnlyRanksMixed) {
  for (int world : {2, 3, 4}) {
    LaunchSpec spec = worker_launch("direct", world, std::chrono::seconds(180));
    spec.rank_env = [](int rank) {
      Env e;
      e["KOLO_DIRECT"] = rank % 2 == 0 ? "0" : "1";
      return e;
    };
    expect_all_ok(run_world(spec));
  }
}

// Where cores are not scarce a waiting caller runs a handed-over collective directly once more
// (Executor::run_waited_direct); with 3 ranks on this 2-core machine only when told not to yield
// at once. The late-rank cases then re-run algorithms on a direct EngineComm that must skip the
// sends the first attempt made.
TEST(Direct, WaitingCallersRerunWhenCoresAreNotScarce) {
  LaunchSpec spec = worker_launch("direct", 3, std::chrono::seconds(180));
  spec.env["KOLO_DIRECT"] = "1";
  spec.env["KOLO_YIELD_WHEN_IDLE"] = "0";
  expect_all_ok(run_world(spec));
}

// A send issued while sends are queued (its ring was full) must queue behind them even when the
// ring has room again by then: sends may pass queued receives only.
TEST(Direct, SendsNeverPassQueuedSends) {
  LaunchSpec spec = worker_launch("direct-order", 2, std::chrono::seconds(60));
  spec.env["KOLO_DIRECT"] = "1";
  spec.env["KOLO_SHM_SLOTS"] = "8";
  spec.env["KOLO_INLINE_WINDOW_US"] = "10000000";  // queued sends stay queued until rank 0 waits
  expect_all_ok(run_world(spec));
}

// A tree's forwarded message longer than one ring slot can never be taken by recv_now: a direct
// attempt posts its receive at once. Held through the spin instead, every gather and scatter
// would wait out KOLO_DIRECT_SPIN_US (here far longer than the test's limit) before it handed
// over: the test would time out.
TEST(Direct, ReceivesLongerThanASlotAreNotHeld) {
  LaunchSpec spec = worker_launch("direct-forward", 4, std::chrono::seconds(60));
  spec.env["KOLO_DIRECT"] = "1";
  spec.env["KOLO_ALGO"] = "gather=tree,scatter=tree";
  spec.env["KOLO_SHM_SLOT_BYTES"] = "1024";
  spec.env["KOLO_DIRECT_SPIN_US"] = "600000000";  // 10 minutes
  expect_all_ok(run_world(spec));
}

TEST(Direct, OffEverywhere) {
  LaunchSpec spec = worker_launch("direct", 2, std::chrono::seconds(180));
  spec.env["KOLO_DIRECT"] = "0";
  const WorldOutcome outcome = run_world(spec);
  expect_all_ok(outcome);
  // The engine defers it to the caller's wait(): not complete when broadcast() returns.
  EXPECT_NE(outcome.ranks.at(0).out.find("ROOT BROADCAST COMPLETE AT ISSUE: no"), std::string::npos)
      << outcome.ranks.at(0).describe();
}

}  // namespace
}  // namespace kolo::coltest

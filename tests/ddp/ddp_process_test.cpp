// DistributedDataParallel across real processes: each test starts ddp-test-worker on N ranks
// (ProcessWorld, from tests/collectives) and requires every rank to report that all its checks
// passed. The checks themselves (against references computed independently of kolo) are in the
// worker's scenario files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

LaunchSpec ddp_launch(const std::string& scenario, int world) {
  LaunchSpec spec;
  spec.program = binary_path("KOLO_DDP_WORKER", "ddp-test-worker");
  spec.args = {scenario};
  spec.world_size = world;
  spec.deadline = std::chrono::seconds(60);
  spec.env["KOLO_TIMEOUT"] = "30";
  spec.env["KOLO_SPIN_US"] = world > 2 ? "0" : "50";  // oversubscribed: waiting ranks should sleep
  return spec;
}

void expect_all_ok(const std::string& scenario, int world) {
  const WorldOutcome outcome = run_world(ddp_launch(scenario, world));
  EXPECT_TRUE(outcome.all_succeeded()) << scenario << " on " << world << " ranks\n" << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) EXPECT_NE(r.out.find("OK rank"), std::string::npos) << r.describe();
}

TEST(DdpProcesses, GradsAfterFinishAreTheMeanOverRanksInAnyMarkOrder) {
  for (int world : {1, 2, 3, 4}) expect_all_ok("average", world);
}

TEST(DdpProcesses, NoSyncAccumulatesThenTheNextStepAveragesTheSums) {
  for (int world : {2, 3}) expect_all_ok("no-sync", world);
}

TEST(DdpProcesses, FirstBucketCompletesBeforeFinish) {
  for (int world : {2, 4}) expect_all_ok("overlap", world);
}

TEST(DdpProcesses, Float16AndBfloat16HooksStayWithinRounding) {
  for (int world : {2, 3}) expect_all_ok("compression", world);
}

TEST(DdpProcesses, LayoutMismatchThrowsOnEveryRankNamingTheParameter) {
  const WorldOutcome outcome = run_world(ddp_launch("mismatch", 3));
  EXPECT_TRUE(outcome.all_succeeded()) << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) {
    EXPECT_NE(r.out.find("OK rank"), std::string::npos) << r.describe();
    EXPECT_NE(r.out.find("MISMATCH kolo: DistributedDataParallel: ranks disagree on the parameter layout: parameter #1: "
                         "rank 1 has 'h.0.attn.w' at offset 64 with 4096 elements where rank 0 has 'h.0.attn.w' at "
                         "offset 64 with 2048 elements (ranks 1, 2 differ from rank 0)"),
              std::string::npos)
        << r.describe();
  }
}

// 2 and 4 ranks leave tails in some buckets of the test model, 3 in none; 1 rank owns everything.
TEST(ShardedProcesses, ShardsHoldTheMeanAndTheGathersRestoreTheModel) {
  for (int world : {1, 2, 3, 4}) expect_all_ok("sharded", world);
}

TEST(ShardedProcesses, Float16AndBfloat16HooksStayWithinRounding) {
  for (int world : {2, 3}) expect_all_ok("sharded-compression", world);
}

TEST(ShardedProcesses, ARankRunningPlainDdpIsRefused) { expect_all_ok("sharded-mismatch", 2); }

// Gradients in device memory: the host stand-in in CI (KOLO_DEVICE_STANDIN=1: "device" memory is
// host memory, streams are threads), the real GPU with KOLO_TEST_REAL_GPU=1 (device-check.sh).
TEST(DdpProcesses, DeviceBuffersAverageExactlyAsHostBuffers) {
  for (int world : {2, 3}) {
    LaunchSpec spec = ddp_launch("device", world);
    const char* real = std::getenv("KOLO_TEST_REAL_GPU");
    if (!(real && std::string(real) == "1")) spec.env["KOLO_DEVICE_STANDIN"] = "1";
    spec.rank_env = [](int rank) { return Env{{"LOCAL_RANK", std::to_string(rank)}}; };
    const WorldOutcome outcome = run_world(spec);
    EXPECT_TRUE(outcome.all_succeeded()) << "device on " << world << " ranks\n" << outcome.describe();
    for (const RankOutcome& r : outcome.ranks) EXPECT_NE(r.out.find("OK rank"), std::string::npos) << r.describe();
  }
}

TEST(DdpProcesses, PeerDeathMidStepIsAPeerErrorNotAHang) {
  const WorldOutcome outcome = run_world(ddp_launch("peer-dies", 2));
  ASSERT_EQ(outcome.ranks.size(), 2u);
  EXPECT_TRUE(outcome.ranks[0].succeeded()) << outcome.ranks[0].describe();
  EXPECT_NE(outcome.ranks[0].out.find("OK rank 0"), std::string::npos) << outcome.ranks[0].describe();
  EXPECT_TRUE(outcome.ranks[1].exited && outcome.ranks[1].exit_code == 0) << outcome.ranks[1].describe();
}

}  // namespace
}  // namespace kolo::coltest

// Receives from any source (ProcessGroup::recv with kAnySource) between real processes, over
// shared memory, TCP, TCP connecting on demand and the environment's transport (ibverbs in the
// RDMA VM): the scenarios are in scenario_any_source.cpp.
// Each successful world ends with every rank printing "OK rank"; the failing ones must raise on
// rank 0 the error that names the right rank (or, for a timeout, the tag).
#include <gtest/gtest.h>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// `transport` null: whatever the environment picks (shm here; ibverbs in the RDMA VM, whose
// tests/rdma/guest-run.sh exports KOLO_TRANSPORT=ibverbs).
LaunchSpec any_source(int world, const char* transport, bool lazy = false) {
  LaunchSpec spec = worker_launch("any-source", world, std::chrono::seconds(90), "30");
  if (transport) spec.env["KOLO_TRANSPORT"] = transport;
  if (lazy) spec.env["KOLO_CONNECT"] = "lazy";
  return spec;
}

TEST(AnySource, EverySenderOnceWithItsDataOverSharedMemory) {
  for (int world : {2, 4}) expect_all_ok(run_world(any_source(world, "shm")));
}

TEST(AnySource, EverySenderOnceWithItsDataOverTcp) {
  for (int world : {2, 4}) expect_all_ok(run_world(any_source(world, "tcp")));
}

TEST(AnySource, EverySenderOnceWithItsDataOverTheEnvironmentsTransport) {
  expect_all_ok(run_world(any_source(4, nullptr)));
}

TEST(AnySource, EverySenderOnceWithItsDataOverTcpConnectingOnDemand) {
  expect_all_ok(run_world(any_source(4, "tcp", /*lazy=*/true)));
}

// Rank 0's outcome in a failing world, after checking that it failed with a kolo error.
const RankOutcome& failed_rank0(const WorldOutcome& outcome) {
  const RankOutcome& r0 = outcome.ranks.at(0);
  EXPECT_TRUE(r0.exited && r0.exit_code == 2) << r0.describe();
  return r0;
}

// Runs the "any-source-fails" scenario `failure` in a world of `world` ranks (20 s timeout),
// with one environment variable set when `env_name` is given.
WorldOutcome run_failing(int world, const char* failure, const char* env_name = nullptr, const char* env_value = nullptr) {
  LaunchSpec spec = worker_launch("any-source-fails", world, std::chrono::seconds(60), "20");
  spec.args.push_back(failure);
  if (env_name != nullptr) spec.env[env_name] = env_value;
  return run_world(spec);
}

TEST(AnySource, SizeMismatchNamesTheSender) {
  for (const char* transport : {"shm", "tcp"}) {
    const WorldOutcome outcome = run_failing(3, "mismatch", "KOLO_TRANSPORT", transport);
    const RankOutcome& r0 = failed_rank0(outcome);
    EXPECT_EQ(error_kind(r0), "MismatchError(peer 1)") << transport << ": " << r0.describe();
    EXPECT_TRUE(contains(error_text(r0), "rank 1 sent")) << r0.describe();
    EXPECT_TRUE(contains(error_text(r0), "recv from any source")) << r0.describe();
  }
}

TEST(AnySource, TimeoutSaysAnySourceAndTheTag) {
  const WorldOutcome outcome = run_failing(2, "timeout");
  const RankOutcome& r0 = failed_rank0(outcome);
  EXPECT_TRUE(contains(error_kind(r0), "TimeoutError")) << r0.describe();
  EXPECT_TRUE(contains(error_text(r0), "recv from any source")) << r0.describe();
  EXPECT_TRUE(contains(error_text(r0), "tag 11")) << r0.describe();
  EXPECT_TRUE(contains(error_text(r0), "timed out after 1.5 s")) << r0.describe();
  EXPECT_LT(r0.seconds, 15.0) << r0.describe();
}

// Not from any source, but the same failing-receive scenario: a named receive that nobody
// answers times out on its own timeout, whether its waiter or the engine thread polls for it.
TEST(AnySource, ReceiveFromANamedRankTimesOutNamingIt) {
  for (const char* inline_mode : {"1", "0"}) {
    const WorldOutcome outcome = run_failing(2, "direct-timeout", "KOLO_INLINE", inline_mode);
    const RankOutcome& r0 = failed_rank0(outcome);
    EXPECT_TRUE(contains(error_kind(r0), "TimeoutError(peer 1)")) << inline_mode << ": " << r0.describe();
    EXPECT_TRUE(contains(error_text(r0), "timed out after 1.5 s waiting for rank 1")) << r0.describe();
    EXPECT_LT(r0.seconds, 15.0) << r0.describe();
  }
}

TEST(AnySource, DeadPeerWhileWaitingIsNamed) {
  for (const char* transport : {"shm", "tcp"}) {
    const WorldOutcome outcome = run_failing(3, "dead", "KOLO_TRANSPORT", transport);
    const RankOutcome& r0 = failed_rank0(outcome);
    EXPECT_EQ(error_kind(r0), "PeerError(peer 2)") << transport << ": " << r0.describe();
    EXPECT_TRUE(contains(error_text(r0), "recv from any source")) << r0.describe();
    EXPECT_LT(r0.seconds, 15.0) << "the death was not noticed before the timeout: " << r0.describe();
  }
}

}  // namespace
}  // namespace kolo::coltest

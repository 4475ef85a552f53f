// Proves the rest of the public API across real processes (each worker checks its results
// against the reference and exits 0 only if everything matched):
//  - ten different collectives in flight at once complete correctly, with sequence numbers and
//    on_complete callbacks in issue order (scenario_inflight.cpp);
//  - split(rank % 2, -rank), split with color -1 and new_group({last, 0, 1}) give the right
//    members in the right order, and their collectives combine exactly the members' data
//    (scenario_subgroups.cpp);
//  - bad arguments throw InvalidArgument from the call, before any byte moves, and the group
//    still works afterwards (scenario_bad_arguments.cpp);
//  - Work::wait(timeout), is_completed, is_success, exception and on_complete behave as
//    documented (scenario_work_api.cpp);
//  - collectives complete correctly, in order and without waiting, whether the caller's thread
//    runs them inside wait() or the engine thread does (scenario_who_runs.cpp), with KOLO_INLINE
//    on and off.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

TEST(Api, TenCollectivesInFlightCompleteInIssueOrder) {
  for (int world : {1, 3, 4}) expect_all_ok(run_world(worker_launch("inflight", world, std::chrono::seconds(60))));
}

TEST(Api, SubgroupsFromSplitAndNewGroup) {
  for (int world : {2, 4, 5}) expect_all_ok(run_world(worker_launch("subgroups", world, std::chrono::seconds(60))));
}

TEST(Api, BadArgumentsAreRefusedBeforeAnyByteMoves) {
  expect_all_ok(run_world(worker_launch("bad-arguments", 2, std::chrono::seconds(60))));
}

TEST(Api, WorkHandleWaitTimeoutCompletionAndCallbacks) {
  expect_all_ok(run_world(worker_launch("work-api", 2, std::chrono::seconds(60))));
}

// Device memory's stream semantics, refusals and failures (scenario_device.cpp): on the host
// stand-in for a GPU, or on a real one with KOLO_TEST_REAL_GPU=1 (scripts/env/device-check.sh).
TEST(Api, DeviceMemoryStreamOrderWaitAndFailures) {
  LaunchSpec spec = worker_launch("device", 2, std::chrono::seconds(90));
  spec.env["KOLO_TEST_DEVICE_MEMORY"] = "1";
  const char* real = std::getenv("KOLO_TEST_REAL_GPU");
  if (!(real && std::string(real) == "1")) spec.env["KOLO_DEVICE_STANDIN"] = "1";
  spec.rank_env = [](int rank) { return Env{{"LOCAL_RANK", std::to_string(rank)}}; };
  expect_all_ok(run_world(spec));
}

TEST(Api, CollectivesRunByTheCallerOrTheEngineThreadAgree) {
  for (const char* inline_mode : {"1", "0"})
    for (int world : {1, 2, 3}) {
      LaunchSpec spec = worker_launch("who-runs", world, std::chrono::seconds(90));
      spec.env["KOLO_INLINE"] = inline_mode;
      expect_all_ok(run_world(spec));
    }
}

}  // namespace
}  // namespace kolo::coltest

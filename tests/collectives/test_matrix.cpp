// Proves every collective produces exactly the right data: for each collective and each world
// size 1..8, one launch of real processes runs the whole correctness matrix of that collective
// (every registered algorithm plus automatic selection; counts 0, 1, world-1, world*3+1, 1001
// and one of at least 4 MiB; in place and out of place; roots 0 and last; every dtype x op at
// the awkward count, see matrix_cases.cpp). Each worker compares every output element with the
// reference formula, checks guard zones and untouched inputs, and exits 0 only if all matched.
#include <gtest/gtest.h>

#include <cstdlib>

#include <string>
#include <tuple>

#include "driver_support.hpp"
#include "matrix_cases.hpp"

namespace kolo::coltest {
namespace {

class CollectiveMatrix : public ::testing::TestWithParam<std::tuple<Coll, int>> {};

TEST_P(CollectiveMatrix, EveryOutputElementMatchesTheReference) {
  const auto [coll, world] = GetParam();
  LaunchSpec spec = worker_launch("matrix", world, std::chrono::seconds(240));
  spec.args.push_back(coll_name(coll));
  const WorldOutcome outcome = run_world(spec);
  EXPECT_TRUE(outcome.all_succeeded()) << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) EXPECT_NE(r.out.find("OK rank"), std::string::npos) << r.describe();
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Coll, int>>& info) {
  return std::string(coll_name(std::get<0>(info.param))) + "_world" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, CollectiveMatrix,
                         ::testing::Combine(::testing::ValuesIn(all_colls()), ::testing::Range(1, 9)), case_name);

// The same matrix on device memory: every buffer is "CUDA" memory, staged through pinned host
// memory (src/engine/device_issue.cpp), issued on the default stream and synchronized before
// the checks. Without a GPU it runs on the host stand-in (KOLO_DEVICE_STANDIN: streams are
// threads, so copies and the engine's gate run asynchronously as on a GPU); with
// KOLO_TEST_REAL_GPU=1 (scripts/env/device-check.sh) on CUDA managed memory of the real GPU,
// every rank on device LOCAL_RANK % devices.
class DeviceMatrix : public CollectiveMatrix {};

TEST_P(DeviceMatrix, EveryOutputElementMatchesTheReference) {
  const auto [coll, world] = GetParam();
  LaunchSpec spec = worker_launch("matrix", world, std::chrono::seconds(240));
  spec.args.push_back(coll_name(coll));
  spec.env["KOLO_TEST_DEVICE_MEMORY"] = "1";
  const char* real = std::getenv("KOLO_TEST_REAL_GPU");
  if (!(real && std::string(real) == "1")) spec.env["KOLO_DEVICE_STANDIN"] = "1";
  spec.rank_env = [](int rank) { return Env{{"LOCAL_RANK", std::to_string(rank)}}; };
  const WorldOutcome outcome = run_world(spec);
  EXPECT_TRUE(outcome.all_succeeded()) << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) EXPECT_NE(r.out.find("OK rank"), std::string::npos) << r.describe();
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, DeviceMatrix,
                         ::testing::Combine(::testing::ValuesIn(all_colls()), ::testing::Range(1, 9)), case_name);

// All-reduce, reduce and broadcast on device memory in many chunks (one host operation each,
// pipelined: DeviceWork::Part), every element checked; at 3 and 4 ranks the reductions' chunks
// take two steps (an all-to-all of slices, reduced on the GPU, then an allgather or gather:
// device_issue.cpp), at 2 ranks one.
TEST(DeviceMatrixChunked, EveryOutputElementMatchesTheReference) {
  for (Coll coll : {Coll::allreduce, Coll::reduce, Coll::broadcast})
    for (int world : {2, 3, 4}) {
      LaunchSpec spec = worker_launch("matrix", world, std::chrono::seconds(240));
      spec.args.push_back(coll_name(coll));
      spec.env["KOLO_TEST_DEVICE_MEMORY"] = "1";
      spec.env["KOLO_DEVICE_CHUNK_BYTES"] = "64K";
      spec.env["KOLO_DEVICE_TWO_STEP_BYTES"] = "1K";
      const char* real = std::getenv("KOLO_TEST_REAL_GPU");
      if (!(real && std::string(real) == "1")) spec.env["KOLO_DEVICE_STANDIN"] = "1";
      spec.rank_env = [](int rank) { return Env{{"LOCAL_RANK", std::to_string(rank)}}; };
      const WorldOutcome outcome = run_world(spec);
      EXPECT_TRUE(outcome.all_succeeded()) << coll_name(coll) << " world " << world << ": " << outcome.describe();
    }
}

}  // namespace
}  // namespace kolo::coltest

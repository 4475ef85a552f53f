// Selection by the cost model reaches the engine: a group reads KOLO_SELECT and KOLO_MODEL_*
// when it forms, and each collective's INFO line names the algorithm that ran. With a model
// in which messages are dear and bytes nearly free, a 128 KiB all-reduce on 4 ranks of one
// host runs recursive doubling (2 exchanges, against ring's 6 steps and the tree's 4 stages);
// under the threshold rule the same call runs the tree (KOLO_TREE_MAX_BYTES is 256 KiB).
#include <gtest/gtest.h>

#include <string>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

WorldOutcome allreduce_128k(const std::string& select) {
  LaunchSpec spec;
  spec.program = perf_binary();
  spec.args = {"allreduce", "-b", "128K", "-e", "128K", "-c", "1", "-n", "1", "-w", "0"};
  spec.world_size = 4;
  spec.deadline = std::chrono::seconds(120);
  spec.env["KOLO_DEBUG"] = "INFO";
  spec.env["KOLO_DEBUG_SUBSYS"] = "COLL";
  spec.env["KOLO_SELECT"] = select;
  spec.env["KOLO_MODEL_SHM"] = "100,1000";  // 100 us a message, 1 TB/s
  spec.env["KOLO_MODEL_NET"] = "100,1000";
  spec.env["KOLO_MODEL_REDUCE_GBPS"] = "1000";
  return run_world(spec);
}

TEST(SelectByModel, TheModelsChoiceRunsAndTheThresholdRuleStillCanBeAskedFor) {
  const WorldOutcome model = allreduce_128k("model");
  ASSERT_TRUE(model.all_succeeded()) << model.describe();
  EXPECT_NE(model.ranks[0].out.find("# Out of bounds values : 0 OK"), std::string::npos) << model.ranks[0].out;
  for (const RankOutcome& r : model.ranks)
    EXPECT_NE(r.err.find(": algorithm rd,"), std::string::npos) << "rank " << r.rank << "\n" << r.err;

  const WorldOutcome rule = allreduce_128k("threshold");
  ASSERT_TRUE(rule.all_succeeded()) << rule.describe();
  for (const RankOutcome& r : rule.ranks)
    EXPECT_NE(r.err.find(": algorithm tree,"), std::string::npos) << "rank " << r.rank << "\n" << r.err;
}

}  // namespace
}  // namespace kolo::coltest

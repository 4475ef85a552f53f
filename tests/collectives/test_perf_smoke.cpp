// Proves kolo-perf runs end to end under a real 2-process launch: with -c 1 every element of
// every size is checked, it exits 0, and rank 0 prints nccl-tests' table and footer.
#include <gtest/gtest.h>

#include <regex>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

LaunchSpec perf_launch(std::vector<std::string> args) {
  LaunchSpec spec;
  spec.program = perf_binary();
  spec.args = std::move(args);
  spec.world_size = 2;
  spec.deadline = std::chrono::seconds(120);
  spec.env["KOLO_TIMEOUT"] = "60";
  return spec;
}

TEST(PerfSmoke, AllreduceWithChecksExitsZeroAndPrintsTheFooter) {
  const WorldOutcome outcome = run_world(perf_launch({"allreduce", "-b", "8", "-e", "1M", "-f", "8", "-c", "1", "-n", "3", "-w", "1"}));
  ASSERT_TRUE(outcome.all_succeeded()) << outcome.describe();
  const std::string& out = outcome.ranks[0].out;
  EXPECT_NE(out.find("# Avg bus bandwidth"), std::string::npos) << out;
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << out;
  EXPECT_NE(out.find("#       size         count      type   redop    root     time   algbw   busbw  #wrong"), std::string::npos) << out;
  // Sizes 8, 64, 512, 4096, 32768, 262144: one row each, 0 wrong out of place and in place.
  const std::regex row(R"((^|\n) +([0-9]+) +([0-9]+) +float +sum +-1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0)");
  size_t rows = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), row); it != std::sregex_iterator(); ++it) ++rows;
  EXPECT_EQ(rows, 6u) << out;
  EXPECT_TRUE(outcome.ranks[1].out.empty()) << "only rank 0 prints: " << outcome.ranks[1].out;
}

TEST(PerfSmoke, EveryCollectiveAndTypeChecksClean) {
  for (const char* coll : {"broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather", "scatter", "sendrecv"}) {
    const WorldOutcome outcome =
        run_world(perf_launch({coll, "-b", "4", "-e", "4K", "-f", "32", "-d", "all", "-o", "all", "-n", "2", "-w", "1", "-r", "1"}));
    EXPECT_TRUE(outcome.all_succeeded()) << coll << ": " << outcome.describe();
    EXPECT_NE(outcome.ranks[0].out.find("# Out of bounds values : 0 OK"), std::string::npos) << coll << ": " << outcome.ranks[0].out;
  }
}

TEST(PerfSmoke, UnknownFlagIsRefusedClearly) {
  // -g is nccl-tests' and accepted; -Q is no one's.
  const WorldOutcome outcome = run_world(perf_launch({"allreduce", "-Q", "1"}));
  for (const RankOutcome& r : outcome.ranks) {
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.describe();
    EXPECT_NE(r.err.find("unknown option '-Q'"), std::string::npos) << r.describe();
  }
}

}  // namespace
}  // namespace kolo::coltest

// kolo-train --elastic's parts that need no process group (examples/train/elastic.hpp): the
// memory of the last two steps, which errors count as a lost rank, and the printed shares. The
// rollback itself runs end to end in elastic_process_test.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "elastic.hpp"
#include "kolo/error.hpp"

namespace kolo::train {
namespace {

TrainState state_after(uint64_t step) {
  TrainState s;
  s.step = step;
  s.params.assign(3, float(step));
  s.sampler.next = step * 16;
  return s;
}

// The survivors may disagree by one step, so the last two are kept; older ones are dropped.
TEST(StepMemory, KeepsTheLastTwoSteps) {
  StepMemory m;
  EXPECT_EQ(m.newest(), 0u);
  for (uint64_t s = 0; s <= 5; ++s) m.keep(state_after(s));
  EXPECT_EQ(m.newest(), 5u);
  EXPECT_EQ(m.take(5).params, std::vector<float>(3, 5.0f));
  EXPECT_EQ(m.take(4).sampler.next, 64u);
  try {
    m.take(3);
    ADD_FAILURE() << "step 3 is older than the two kept";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no state in memory for step 3 (kept: 4, 5)"), std::string::npos) << e.what();
  }
  m.keep_line(4, "step 4 loss 1");
  m.keep_line(5, "step 5 loss 2");
  m.keep_line(6, "step 6 loss 3");
  EXPECT_EQ(m.line(5), "step 5 loss 2");
  EXPECT_EQ(m.line(4), "");
  m.clear();
  EXPECT_EQ(m.newest(), 0u);
}

// What a dead or stopped peer raises starts a recovery; a mistake every survivor would repeat,
// or this rank's own exclusion, does not.
TEST(StepMemory, OnlyALostRankStartsARecovery) {
  EXPECT_TRUE(is_rank_loss(PeerError("connection to rank 2 closed", 2)));
  EXPECT_TRUE(is_rank_loss(TimeoutError("timed out waiting for rank 1", 1)));
  EXPECT_TRUE(is_rank_loss(Error("aborted: rank 3 failed")));
  EXPECT_FALSE(is_rank_loss(InvalidArgument("bad count")));
  EXPECT_FALSE(is_rank_loss(MismatchError("layouts differ", 1)));
  EXPECT_FALSE(is_rank_loss(ExcludedError("excluded from generation 1", 1)));
  EXPECT_FALSE(is_rank_loss(std::runtime_error("not kolo's")));
  EXPECT_EQ(blamed_rank(PeerError("x", 2)), "rank 2");
  EXPECT_EQ(blamed_rank(TimeoutError("x", -1)), "a rank");
}

// The files a run wrote, not others: a stale checkpoint of another run (step 6 here, not a
// multiple of 4) or one past the failed step is not taken; one that rank 0 died before writing
// (step 8) leaves the one before.
TEST(StepMemory, ZeroOneRollsBackToTheNewestCheckpointOnDisk) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kolo-elastic-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto touch = [&](uint64_t step) { std::ofstream(checkpoint_path(dir.string(), step)) << "x"; };
  EXPECT_EQ(newest_checkpoint_written(dir.string(), 0, 10, 4), 0u);  // none yet: the start
  touch(4);
  touch(6);
  touch(12);
  EXPECT_EQ(newest_checkpoint_written(dir.string(), 0, 10, 4), 4u);
  EXPECT_EQ(newest_checkpoint_written(dir.string(), 0, 10, 0), 0u);  // --ckpt-every 0: only at the end
  EXPECT_EQ(newest_checkpoint_written(dir.string(), 6, 7, 4), 6u);   // resumed from step 6
  EXPECT_EQ(newest_checkpoint_written(dir.string(), 0, 12, 4), 12u);
  fs::remove_all(dir);
}

TEST(StepMemory, SharesDifferByAtMostOne) {
  EXPECT_EQ(shares_text(16, 3), "6+5+5");
  EXPECT_EQ(shares_text(16, 4), "4+4+4+4");
  EXPECT_EQ(shares_text(17, 2), "9+8");
  EXPECT_EQ(shares_text(5, 1), "5");
  // The summary's local batch: the split the run ended with (train_step.hpp's micro-batch cut).
  EXPECT_EQ(local_batch_text(16, 4, 1), "4");
  EXPECT_EQ(local_batch_text(16, 3, 1), "5-6");
  EXPECT_EQ(local_batch_text(16, 3, 2), "2-3");
  EXPECT_EQ(local_batch_text(32, 4, 2), "4");
  EXPECT_EQ(local_batch_text(12, 3, 2), "2");
}

}  // namespace
}  // namespace kolo::train

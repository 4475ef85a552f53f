// kolo-train end to end: the real binary under kolorun, on a tiny model and a small generated
// corpus (so the tests do not depend on the bible-kjv package). Checks that data parallelism is
// exact (K ranks x batch b == 1 rank x batch K*b, with and without gradient accumulation), that
// --resume continues bitwise, and that a dead rank or mismatched models stop the job with a clear
// error instead of a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "train_run.hpp"

namespace kolo::train {
namespace {

const TrainRun& one_rank_batch_8() {
  static const TrainRun run = train(1, "one-rank-b8", {"--batch", "8", "--steps", "20"});
  return run;
}

TEST(KoloTrain, TwoRanksEqualOneRankWithTheSameGlobalBatch) {
  const TrainRun& single = one_rank_batch_8();
  ASSERT_RUN_OK(single);
  const TrainRun two = train(2, "two-ranks-b4", {"--batch", "4", "--steps", "20"});
  ASSERT_RUN_OK(two);
  expect_learning(single, 20);
  expect_same_training(two, single, 20);
  EXPECT_NE(single.result.out.find("tokens/s "), std::string::npos);
  EXPECT_NE(two.result.out.find("summary ranks 2 local_batch 4"), std::string::npos) << two.result.out;
}

// Global batch 8 both ways: 2 ranks x batch 2 x 2 accumulated micro-steps (the first under no_sync).
TEST(KoloTrain, GradientAccumulationEqualsOneLargeBatch) {
  const TrainRun& single = one_rank_batch_8();
  ASSERT_RUN_OK(single);
  const TrainRun accumulated = train(2, "two-ranks-b2-accum2", {"--batch", "2", "--accum", "2", "--steps", "20"});
  ASSERT_RUN_OK(accumulated);
  expect_same_training(accumulated, single, 20);
}

// 10 steps with a checkpoint at 5, against a run resumed from that checkpoint: steps 6..10 print
// exactly the same losses and end with exactly the same parameters.
TEST(KoloTrain, ResumeContinuesBitwise) {
  const std::vector<std::string> flags{"--batch", "4", "--steps", "10", "--ckpt-every", "5"};
  const TrainRun whole = train(2, "whole", flags);
  ASSERT_RUN_OK(whole);
  const fs::path saved = work_dir() / "whole-ckpt" / "step-00000005.ckpt";
  ASSERT_TRUE(fs::exists(saved)) << whole.result.out;

  fs::create_directories(work_dir() / "resumed-ckpt");
  fs::copy_file(saved, work_dir() / "resumed-ckpt" / saved.filename());
  std::vector<std::string> resume_flags = flags;
  resume_flags.push_back("--resume");
  const TrainRun resumed = train(2, "resumed", resume_flags);
  ASSERT_RUN_OK(resumed);
  EXPECT_NE(resumed.result.out.find("resumed from"), std::string::npos) << resumed.result.out;

  ASSERT_EQ(resumed.losses.size(), 5u) << resumed.result.out;
  for (int s = 6; s <= 10; ++s) {
    ASSERT_TRUE(resumed.losses.count(s)) << "step " << s << " missing";
    EXPECT_EQ(resumed.losses.at(s), whole.losses.at(s)) << "step " << s;
  }
  ASSERT_EQ(resumed.params.size(), whole.params.size());
  EXPECT_TRUE(resumed.params == whole.params) << "final parameters differ after resuming";
}

// Rank 1 SIGKILLs itself as step 5 begins: rank 0 must fail promptly, naming rank 1.
TEST(KoloTrain, KilledRankStopsTheJobNamingIt) {
  const ProcessResult r = kolorun(2, tiny_run({"--batch", "4", "--steps", "100000", "--die-at-step", "5",
                                               "--die-rank", "1", "--ckpt", (work_dir() / "killed").string()}),
                                  // Time enough for rank 0 to report on its own before kolorun stops it.
                                  {{"KOLO_TIMEOUT", "10"}, {"KOLO_LAUNCH_GRACE", "10"}});
  ASSERT_FALSE(r.timed_out) << "the job hung after a rank died\n" << r.err;
  EXPECT_FALSE(r.exited() && r.exit_code() == 0) << r.out;
  EXPECT_NE(r.err.find("killing myself"), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("kolo-train rank 0: training stopped at step [45].*rank 1")))
      << r.err;
  // The run never got far past the death.
  EXPECT_LT(step_losses(r.out).size(), 10u);
}

// Rank 1 builds a 2-layer model, rank 0 a 1-layer one: DDP refuses before any step.
TEST(KoloTrain, MismatchedModelsAreRefusedAtStart) {
  std::vector<std::string> program{"/bin/sh", "-c",
                                   "if [ \"$RANK\" = 1 ]; then layers=2; else layers=1; fi; "
                                   "exec \"$@\" --layers $layers",
                                   "sh"};
  const std::vector<std::string> run = tiny_run({"--batch", "4", "--steps", "5", "--ckpt", (work_dir() / "mm").string()});
  program.insert(program.end(), run.begin(), run.end());
  const ProcessResult r = kolorun(2, program);
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_FALSE(r.exited() && r.exit_code() == 0) << r.out;
  EXPECT_NE(r.err.find("training stopped before the first step"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ranks disagree on the parameter layout"), std::string::npos) << r.err;
  EXPECT_TRUE(step_losses(r.out).empty()) << r.out;
}

// --device cuda where it cannot run: a build without CUDA (CI) refuses it as such; a build with
// CUDA finds no GPU (none here, or hidden from it by CUDA_VISIBLE_DEVICES on a GPU machine).
// Either way: a clear line on stderr, exit 2, before any training.
TEST(KoloTrain, CudaWithoutAGpuIsRefusedWithAnExplanation) {
  const ProcessResult r =
      ChildProcess({trainer_path(), "--device", "cuda", "--steps", "1"}, {{"CUDA_VISIBLE_DEVICES", ""}}).wait(30);
  EXPECT_TRUE(r.exited() && r.exit_code() == 2) << "status " << r.wait_status << "\n" << r.out << r.err;
  const bool no_cuda = r.err.find("kolo-train: --device cuda: this kolo-train was built without CUDA") != std::string::npos;
  const bool no_gpu = r.err.find("kolo-train: --device cuda: no usable GPU: ") != std::string::npos;
  EXPECT_TRUE(no_cuda || no_gpu) << r.err;
  EXPECT_TRUE(step_losses(r.out).empty()) << r.out;
}

TEST(KoloTrain, HelpListsTheFlags) {
  const ProcessResult r = ChildProcess({trainer_path(), "--help"}).wait(30);
  ASSERT_TRUE(r.exited() && r.exit_code() == 0);
  for (const char* flag : {"--batch", "--seq", "--layers", "--heads", "--dim", "--steps", "--lr", "--seed", "--accum",
                           "--data", "--ckpt", "--resume", "--device"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace kolo::train

// kolo-train --device cuda end to end (suite 'gpu'): 2 ranks x batch 4 on the GPU(s) train as
// 1 rank x batch 8 (both ranks share the GPU when there is one: LOCAL_RANK % visible GPUs),
// with their gradients all-reduced from device memory; and the GPU run's first loss is the CPU
// run's (same seed, same weights, same data). Skips, saying why, without a usable GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "model/cuda/cuda_support.hpp"
#include "train_run.hpp"

namespace kolo::train {
namespace {

constexpr int kSteps = 10;

void print_losses(const char* name, const TrainRun& run) {
  std::printf("%s losses:", name);
  for (const auto& [step, loss] : run.losses) std::printf(" %d:%s", step, loss.c_str());
  std::printf("\n");
}

TEST(KoloTrainCuda, TwoRanksEqualOneRankWithTheSameGlobalBatch) {
  if (const std::string why = gpt::cuda::unavailable_reason(); !why.empty())
    GTEST_SKIP() << "no usable CUDA device: " << why;
  const TrainRun single = train(1, "cuda-1x8", {"--device", "cuda", "--batch", "8", "--steps", std::to_string(kSteps)});
  ASSERT_RUN_OK(single);
  const TrainRun two = train(2, "cuda-2x4", {"--device", "cuda", "--batch", "4", "--steps", std::to_string(kSteps)});
  ASSERT_RUN_OK(two);
  print_losses("1 rank x batch 8", single);
  print_losses("2 ranks x batch 4", two);
  EXPECT_NE(single.result.out.find("--device cuda: rank 0 on cuda:"), std::string::npos) << single.result.out;
  EXPECT_NE(two.result.out.find("DDP (cuda)"), std::string::npos) << two.result.out;
  expect_same_training(two, single, kSteps);
  ASSERT_EQ(single.losses.size(), size_t(kSteps));
  EXPECT_LT(std::stod(single.losses.at(kSteps)), std::stod(single.losses.at(1)) - 0.1) << "no learning";

  // The CPU model from the same seed: the first step's loss is a forward pass of the same weights.
  const TrainRun cpu = train(1, "cpu-1x8", {"--batch", "8", "--steps", "1"});
  ASSERT_RUN_OK(cpu);
  print_losses("cpu 1 rank x batch 8", cpu);
  ASSERT_EQ(cpu.losses.size(), 1u);
  const double lg = std::stod(single.losses.at(1)), lc = std::stod(cpu.losses.at(1));
  EXPECT_LE(std::fabs(lg - lc), 1e-5 * lc) << "first loss on the GPU " << lg << ", on the CPU " << lc;
}

}  // namespace
}  // namespace kolo::train

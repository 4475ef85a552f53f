// The learning-rate schedule of GPT-2/nanoGPT: linear warmup to the peak, then a cosine decay to
// the minimum at the last step.
#pragma once
#include <cstdint>

namespace kolo::train {

struct LrSchedule {
  double peak = 1e-3;
  double minimum = 1e-4;
  uint64_t warmup_steps = 0;
  uint64_t total_steps = 1;

  // Learning rate of optimizer step `step` (0-based): (step+1)/warmup * peak during warmup, then
  // minimum + (peak - minimum) * (1 + cos(pi * progress)) / 2 with progress going from 0 right
  // after warmup to 1 at the last step.
  double at(uint64_t step) const;
};

}  // namespace kolo::train

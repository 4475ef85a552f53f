#include "lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kolo::train {

double LrSchedule::at(uint64_t step) const {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const uint64_t decay_steps = total_steps > warmup_steps + 1 ? total_steps - warmup_steps - 1 : 0;
  if (decay_steps == 0) return peak;
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  return minimum + (peak - minimum) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace kolo::train

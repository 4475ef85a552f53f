#include "adamw.hpp"

#include <cmath>
#include <string>

#include "kolo/error.hpp"

namespace kolo::train {

AdamW::AdamW(size_t state_size, std::vector<DecayRange> ranges, AdamWConfig config)
    : ranges_(std::move(ranges)), config_(config), m_(state_size, 0.0f), v_(state_size, 0.0f) {
  for (const DecayRange& r : ranges_)
    if (r.state_begin() + r.count > state_size)
      throw InvalidArgument("AdamW: range [" + std::to_string(r.offset) + ", " + std::to_string(r.offset + r.count) +
                            ") has its state outside the " + std::to_string(state_size) + " elements of the state");
}

void AdamW::step(float* params, const float* grads, float lr) {
  ++steps_;
  const double t = static_cast<double>(steps_);
  const float bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta1), t));
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(config_.beta2), t)));
  const float step_size = lr / bias_correction1;
  const float b1 = config_.beta1, b2 = config_.beta2;
  for (const DecayRange& r : ranges_) {
    // Decoupled decay: shrink the weight itself, independently of the gradient statistics.
    const float shrink = r.decay ? 1.0f - lr * config_.weight_decay : 1.0f;
    float* p = params + r.offset;
    const float* g = grads + r.offset;
    float* m = m_.data() + r.state_begin();
    float* v = v_.data() + r.state_begin();
    for (size_t i = 0; i < r.count; ++i) {
      p[i] *= shrink;
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      const float denom = std::sqrt(v[i]) / bias_correction2_sqrt + config_.eps;
      p[i] -= step_size * m[i] / denom;
    }
  }
}

}  // namespace kolo::train

#include "grad_clip.hpp"

#include <cmath>

namespace kolo::train {

double global_grad_norm(const float* grads, size_t count) {
  double sum = 0;
  for (size_t i = 0; i < count; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  return std::sqrt(sum);
}

float clip_scale(double norm, double max_norm) {
  return max_norm > 0 && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.0f;
}

double clip_grad_norm(float* grads, size_t count, double max_norm) {
  const double norm = global_grad_norm(grads, count);
  if (const float scale = clip_scale(norm, max_norm); scale != 1.0f)
    for (size_t i = 0; i < count; ++i) grads[i] *= scale;
  return norm;
}

}  // namespace kolo::train

// Gradient clipping on the global L2 norm (torch.nn.utils.clip_grad_norm_). Called after the
// DDP all-reduce, when every rank holds the same averaged gradients, so the local norm is the
// global one and every rank scales identically.
#pragma once
#include <cstddef>

namespace kolo::train {

// The L2 norm of grads[0..count), accumulated in double.
double global_grad_norm(const float* grads, size_t count);

// The factor clip_grad_norm scales by: max_norm / (norm + 1e-6) when norm exceeds max_norm, else
// 1 (also when max_norm <= 0). Exposed for a sharded optimizer, which scales only its shard.
float clip_scale(double norm, double max_norm);

// Scales the gradients by max_norm / (norm + 1e-6) when their norm exceeds max_norm (max_norm <= 0
// disables clipping). Returns the norm before clipping.
double clip_grad_norm(float* grads, size_t count, double max_norm);

}  // namespace kolo::train

// The optimizer's element-wise passes on the GPU (cuda_optim.cu), for kolo-train --device cuda:
// the squared L2 norm of the gradients, their scaling (clipping), and AdamW over one element
// range, computed as the CPU's (examples/train/adamw.cpp, grad_clip.cpp). Device pointers;
// `stream` is a cudaStream_t as void*.
#pragma once
#include <cstddef>

namespace kolo::gpt::cuda {

// sum of x[i]^2, accumulated in double: per-block partial sums in a fixed order, added on the
// host. Synchronizes the stream (the caller needs the value).
double sum_of_squares(const float* x, size_t n, void* stream);
void scale(float* x, size_t n, float factor, void* stream);

// One AdamW update of n elements (torch.optim.AdamW): p *= shrink; m, v updated from g;
// p -= step_size * m / (sqrt(v) / bias_correction2_sqrt + eps).
struct AdamWStep {
  float beta1, beta2, eps;
  float shrink;      // 1 - lr * weight_decay, or 1 for a range without decay
  float step_size;   // lr / bias_correction1
  float bias_correction2_sqrt;
};
void adamw(float* p, const float* g, float* m, float* v, size_t n, const AdamWStep& s, void* stream);

}  // namespace kolo::gpt::cuda

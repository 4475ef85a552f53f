#include <cuda_runtime.h>

#include <vector>

#include "cuda_optim.hpp"
#include "cuda_support.hpp"

namespace kolo::gpt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kNormBlocks = 256;  // fixed, so the partial sums and their order do not depend on n

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

__global__ void sum_of_squares_k(double* partial, const float* x, size_t n) {
  __shared__ double lane_sums[kThreads];
  double s = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    s += double(x[i]) * double(x[i]);
  lane_sums[threadIdx.x] = s;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (int(threadIdx.x) < half) lane_sums[threadIdx.x] += lane_sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = lane_sums[0];
}

__global__ void scale_k(float* x, size_t n, float factor) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void adamw_k(float* p, const float* g, float* m, float* v, size_t n, AdamWStep s) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float gi = g[i];
  float pi = p[i] * s.shrink;
  const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * gi;
  const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * gi * gi;
  const float denom = sqrtf(vi) / s.bias_correction2_sqrt + s.eps;
  pi -= s.step_size * mi / denom;
  p[i] = pi;
  m[i] = mi;
  v[i] = vi;
}

}  // namespace

double sum_of_squares(const float* x, size_t n, void* stream) {
  DeviceArray<double> partial(kNormBlocks);
  sum_of_squares_k<<<kNormBlocks, kThreads, 0, as_stream(stream)>>>(partial.get(), x, n);
  std::vector<double> host(kNormBlocks);
  download(host.data(), partial.get(), kNormBlocks * sizeof(double), stream);  // synchronizes
  double sum = 0;
  for (double d : host) sum += d;
  return sum;
}

void scale(float* x, size_t n, float factor, void* stream) {
  if (n == 0) return;
  scale_k<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, as_stream(stream)>>>(x, n, factor);
}

void adamw(float* p, const float* g, float* m, float* v, size_t n, const AdamWStep& s, void* stream) {
  if (n == 0) return;
  adamw_k<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, as_stream(stream)>>>(p, g, m, v, n, s);
}

}  // namespace kolo::gpt::cuda

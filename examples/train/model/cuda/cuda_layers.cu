// The GPU model's kernels (see cuda_layers.hpp). Simple and exact rather than fast: one thread
// per element for the element-wise passes, one warp per row for the row reductions (layernorm,
// softmax, an attention row), one thread per column for the sums over rows (parameter
// gradients), so no atomics and a fixed summation order. Accurate libm (expf, tanhf, sqrtf; no
// --use_fast_math): the gradient test compares with the double CPU model at 1e-4.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda_layers.hpp"

namespace kolo::gpt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
unsigned warp_blocks_for(size_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// The warp this thread belongs to, over the whole grid, and its lane.
__device__ size_t global_warp() { return (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; }
__device__ int lane() { return int(threadIdx.x % 32); }

__global__ void embedding_forward_k(float* out, const int* tokens, const float* wte, const float* wpe, int N, int T,
                                    int C) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(N) * C) return;
  const int n = int(i / C), c = int(i % C);
  out[i] = wte[size_t(tokens[n]) * C + c] + wpe[size_t(n % T) * C + c];
}

// One thread per column c of wte: the rows of one token are added in position order, as on the CPU.
__global__ void embedding_backward_wte_k(float* dwte, const float* dout, const int* tokens, int N, int C) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  for (int n = 0; n < N; ++n) dwte[size_t(tokens[n]) * C + c] += dout[size_t(n) * C + c];
}

// One thread per (t, c) of wpe: the batch rows of position t, in order.
__global__ void embedding_backward_wpe_k(float* dwpe, const float* dout, int N, int T, int C) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(T) * C) return;
  const int t = int(i / C), c = int(i % C);
  float sum = 0;
  for (int n = t; n < N; n += T) sum += dout[size_t(n) * C + c];
  dwpe[i] += sum;
}

__global__ void layernorm_forward_k(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                    const float* bias, int N, int C) {
  const size_t row = global_warp();
  if (row >= size_t(N)) return;
  const float* x = inp + row * C;
  float* y = out + row * C;
  float s = 0;
  for (int c = lane(); c < C; c += 32) s += x[c];
  const float m = warp_sum(s) / C;
  float v = 0;
  for (int c = lane(); c < C; c += 32) v += (x[c] - m) * (x[c] - m);
  const float r = 1.0f / sqrtf(warp_sum(v) / C + 1e-5f);
  for (int c = lane(); c < C; c += 32) y[c] = (x[c] - m) * r * weight[c] + bias[c];
  if (lane() == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// dinp, a warp per row: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight.
__global__ void layernorm_backward_input_k(float* dinp, const float* dout, const float* inp, const float* weight,
                                           const float* mean, const float* rstd, int N, int C) {
  const size_t row = global_warp();
  if (row >= size_t(N)) return;
  const float* x = inp + row * C;
  const float* dy = dout + row * C;
  float* dx = dinp + row * C;
  const float m = mean[row], s = rstd[row];
  float g_sum = 0, gx_sum = 0;
  for (int c = lane(); c < C; c += 32) {
    const float xhat = (x[c] - m) * s;
    const float g = dy[c] * weight[c];
    g_sum += g;
    gx_sum += g * xhat;
  }
  const float g_mean = warp_sum(g_sum) / C, gx_mean = warp_sum(gx_sum) / C;
  for (int c = lane(); c < C; c += 32) {
    const float xhat = (x[c] - m) * s;
    dx[c] += s * (dy[c] * weight[c] - g_mean - xhat * gx_mean);
  }
}

// dweight and dbias, a thread per column (coalesced across the threads of a row).
__global__ void layernorm_backward_params_k(float* dweight, float* dbias, const float* dout, const float* inp,
                                            const float* mean, const float* rstd, int N, int C) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  float dw = 0, db = 0;
  for (int n = 0; n < N; ++n) {
    const float dy = dout[size_t(n) * C + c];
    db += dy;
    dw += (inp[size_t(n) * C + c] - mean[n]) * rstd[n] * dy;
  }
  dweight[c] += dw;
  dbias[c] += db;
}

__global__ void fill_rows_k(float* out, const float* bias, int N, int OC) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(N) * OC) return;
  out[i] = bias ? bias[i % OC] : 0.0f;
}

__global__ void bias_backward_k(float* dbias, const float* dout, int N, int OC) {
  const int j = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= OC) return;
  float sum = 0;
  for (int n = 0; n < N; ++n) sum += dout[size_t(n) * OC + j];
  dbias[j] += sum;
}

// A warp per (b, h, t): the scores of row t against keys 0..t, their softmax, and the output
// row (lanes over the head's channels).
__global__ void attention_forward_k(float* out, float* att, const float* qkv, int B, int T, int C, int H) {
  const size_t w = global_warp();
  if (w >= size_t(B) * H * T) return;
  const int t = int(w % T), h = int((w / T) % H), b = int(w / (size_t(T) * H));
  const int hs = C / H;
  const size_t C3 = 3 * size_t(C);
  const float scale = 1.0f / sqrtf(float(hs));
  const float* q = qkv + (size_t(b) * T + t) * C3 + size_t(h) * hs;
  float* row = att + w * T;  // w == (b*H + h)*T + t
  float mx = -INFINITY;
  for (int j = lane(); j <= t; j += 32) {
    const float* k = qkv + (size_t(b) * T + j) * C3 + C + size_t(h) * hs;
    float s = 0;
    for (int i = 0; i < hs; ++i) s += q[i] * k[i];
    s *= scale;
    row[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = warp_max(mx);
  float sum = 0;
  for (int j = lane(); j <= t; j += 32) {
    const float e = expf(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane(); j < T; j += 32) row[j] = j <= t ? row[j] * inv : 0.0f;  // causal mask
  __syncwarp();  // every lane reads the whole row below
  float* y = out + (size_t(b) * T + t) * C + size_t(h) * hs;
  for (int i = lane(); i < hs; i += 32) {
    float acc = 0;
    for (int j = 0; j <= t; ++j) acc += row[j] * qkv[(size_t(b) * T + j) * C3 + 2 * size_t(C) + size_t(h) * hs + i];
    y[i] = acc;
  }
}

// Pass 1, a warp per (b, h, t): dP[t, j] = dy[t] . v[j], the softmax backward
// dS = P * (dP - sum_j P dP) into dscores, and dq[t] = scale * sum_j dS[t, j] k[j].
__global__ void attention_backward_rows_k(float* dqkv, float* dscores, const float* dout, const float* qkv,
                                          const float* att, int B, int T, int C, int H) {
  const size_t w = global_warp();
  if (w >= size_t(B) * H * T) return;
  const int t = int(w % T), h = int((w / T) % H), b = int(w / (size_t(T) * H));
  const int hs = C / H;
  const size_t C3 = 3 * size_t(C);
  const float scale = 1.0f / sqrtf(float(hs));
  const float* dy = dout + (size_t(b) * T + t) * C + size_t(h) * hs;
  const float* p = att + w * T;
  float* ds = dscores + w * T;
  float dot = 0;
  for (int j = lane(); j <= t; j += 32) {
    const float* v = qkv + (size_t(b) * T + j) * C3 + 2 * size_t(C) + size_t(h) * hs;
    float dp = 0;
    for (int i = 0; i < hs; ++i) dp += dy[i] * v[i];
    ds[j] = dp;
    dot += p[j] * dp;
  }
  dot = warp_sum(dot);
  for (int j = lane(); j < T; j += 32) ds[j] = j <= t ? p[j] * (ds[j] - dot) : 0.0f;
  __syncwarp();
  float* dq = dqkv + (size_t(b) * T + t) * C3 + size_t(h) * hs;
  for (int i = lane(); i < hs; i += 32) {
    float acc = 0;
    for (int j = 0; j <= t; ++j) acc += ds[j] * qkv[(size_t(b) * T + j) * C3 + C + size_t(h) * hs + i];
    dq[i] = scale * acc;
  }
}

// Pass 2, a warp per (b, h, j): the key and value of position j collect from the rows t >= j:
// dk[j] = scale * sum_t dS[t, j] q[t], dv[j] = sum_t P[t, j] dy[t].
__global__ void attention_backward_columns_k(float* dqkv, const float* dscores, const float* dout, const float* qkv,
                                             const float* att, int B, int T, int C, int H) {
  const size_t w = global_warp();
  if (w >= size_t(B) * H * T) return;
  const int j = int(w % T), h = int((w / T) % H), b = int(w / (size_t(T) * H));
  const int hs = C / H;
  const size_t C3 = 3 * size_t(C);
  const float scale = 1.0f / sqrtf(float(hs));
  const size_t head = (size_t(b) * H + h) * T;  // first row of this head's [T, T] matrices
  float* dk = dqkv + (size_t(b) * T + j) * C3 + C + size_t(h) * hs;
  float* dv = dk + C;
  for (int i = lane(); i < hs; i += 32) {
    float k_acc = 0, v_acc = 0;
    for (int t = j; t < T; ++t) {
      const size_t row = (size_t(b) * T + t);
      k_acc += dscores[(head + t) * T + j] * qkv[row * C3 + size_t(h) * hs + i];
      v_acc += att[(head + t) * T + j] * dout[row * C + size_t(h) * hs + i];
    }
    dk[i] = scale * k_acc;
    dv[i] = v_acc;
  }
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__global__ void gelu_forward_k(float* out, const float* inp, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  out[i] = 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
}

__global__ void gelu_backward_k(float* dinp, const float* inp, const float* dout, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  const float th = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  dinp[i] = (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du_dx) * dout[i];
}

__global__ void add_k(float* out, const float* a, const float* b, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// A warp per row. The loss is log(sum) + max - z[y]: exact even where the probability underflows.
__global__ void softmax_cross_entropy_forward_k(float* probs, float* losses, const float* logits, const int* targets,
                                                int N, int V) {
  const size_t n = global_warp();
  if (n >= size_t(N)) return;
  const float* z = logits + n * V;
  float* p = probs + n * V;
  float mx = -INFINITY;
  for (int i = lane(); i < V; i += 32) mx = fmaxf(mx, z[i]);
  mx = warp_max(mx);
  float sum = 0;
  for (int i = lane(); i < V; i += 32) {
    const float e = expf(z[i] - mx);
    p[i] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  const float inv = 1.0f / sum;
  for (int i = lane(); i < V; i += 32) p[i] *= inv;
  if (targets && lane() == 0) losses[n] = logf(sum) + mx - z[targets[n]];
}

__global__ void softmax_cross_entropy_backward_k(float* dlogits, const float* probs, const int* targets, int N, int V,
                                                 float f) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(N) * V) return;
  const size_t n = i / V;
  const int v = int(i % V);
  dlogits[i] = probs[i] * f - (v == targets[n] ? f : 0.0f);
}

}  // namespace

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int N, int T, int C,
                       void* stream) {
  embedding_forward_k<<<blocks_for(size_t(N) * C), kThreads, 0, as_stream(stream)>>>(out, tokens, wte, wpe, N, T, C);
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int N, int T, int C,
                        void* stream) {
  embedding_backward_wte_k<<<blocks_for(size_t(C)), kThreads, 0, as_stream(stream)>>>(dwte, dout, tokens, N, C);
  embedding_backward_wpe_k<<<blocks_for(size_t(T) * C), kThreads, 0, as_stream(stream)>>>(dwpe, dout, N, T, C);
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       int N, int C, void* stream) {
  layernorm_forward_k<<<warp_blocks_for(size_t(N)), kThreads, 0, as_stream(stream)>>>(out, mean, rstd, inp, weight,
                                                                                       bias, N, C);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C, void* stream) {
  layernorm_backward_input_k<<<warp_blocks_for(size_t(N)), kThreads, 0, as_stream(stream)>>>(dinp, dout, inp, weight,
                                                                                              mean, rstd, N, C);
  layernorm_backward_params_k<<<blocks_for(size_t(C)), kThreads, 0, as_stream(stream)>>>(dweight, dbias, dout, inp,
                                                                                          mean, rstd, N, C);
}

void fill_rows(float* out, const float* bias, int N, int OC, void* stream) {
  fill_rows_k<<<blocks_for(size_t(N) * OC), kThreads, 0, as_stream(stream)>>>(out, bias, N, OC);
}

void bias_backward(float* dbias, const float* dout, int N, int OC, void* stream) {
  bias_backward_k<<<blocks_for(size_t(OC)), kThreads, 0, as_stream(stream)>>>(dbias, dout, N, OC);
}

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H, void* stream) {
  attention_forward_k<<<warp_blocks_for(size_t(B) * H * T), kThreads, 0, as_stream(stream)>>>(out, att, qkv, B, T, C,
                                                                                               H);
}

void attention_backward(float* dqkv, float* dscores, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int H, void* stream) {
  const unsigned blocks = warp_blocks_for(size_t(B) * H * T);
  attention_backward_rows_k<<<blocks, kThreads, 0, as_stream(stream)>>>(dqkv, dscores, dout, qkv, att, B, T, C, H);
  attention_backward_columns_k<<<blocks, kThreads, 0, as_stream(stream)>>>(dqkv, dscores, dout, qkv, att, B, T, C,
                                                                           H);
}

void gelu_forward(float* out, const float* inp, size_t n, void* stream) {
  gelu_forward_k<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(out, inp, n);
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, void* stream) {
  gelu_backward_k<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(dinp, inp, dout, n);
}

void add(float* out, const float* a, const float* b, size_t n, void* stream) {
  add_k<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(out, a, b, n);
}

void softmax_cross_entropy_forward(float* probs, float* losses, const float* logits, const int* targets, int N, int V,
                                   void* stream) {
  softmax_cross_entropy_forward_k<<<warp_blocks_for(size_t(N)), kThreads, 0, as_stream(stream)>>>(probs, losses,
                                                                                                   logits, targets, N, V);
}

void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int* targets, int N, int V, float scale,
                                    void* stream) {
  softmax_cross_entropy_backward_k<<<blocks_for(size_t(N) * V), kThreads, 0, as_stream(stream)>>>(
      dlogits, probs, targets, N, V, scale / float(N));
}

}  // namespace kolo::gpt::cuda

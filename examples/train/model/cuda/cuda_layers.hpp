// The CUDA kernels of the GPU model (cuda_layers.cu), one launcher per layer pass, mirroring the
// CPU layers (embedding.hpp, layernorm.hpp, attention.hpp, gelu.hpp, cross_entropy.hpp) in
// float32. The matrix products are cuBLAS's (cuda_model.cpp); these are the rest. Every pointer
// is device memory; `stream` is a cudaStream_t as void* (this header stays free of CUDA's, so
// g++ compiles its users). Launchers queue work and return; kernel errors surface at the next
// CUDA call that reports them (cuda_check).
//
// Unlike the CPU layers, a backward here ADDS only where a gradient is shared (parameter
// gradients, the residual stream dinp of layernorm); scratch gradients are written. No
// atomics: every sum has one thread (or warp) and a fixed order, so a step is reproducible.
#pragma once
#include <cstddef>

namespace kolo::gpt::cuda {

// out[n,c] = wte[tokens[n],c] + wpe[n % T, c] over N = B*T rows.
void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int N, int T, int C,
                       void* stream);
// dwte[tokens[n]] += dout[n], dwpe[n % T] += dout[n].
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int N, int T, int C,
                        void* stream);

// LayerNorm with eps 1e-5 and the biased variance (two passes, as the CPU layer).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       int N, int C, void* stream);
// dinp += ..., dweight += ..., dbias += ...
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C, void* stream);

// out[n, j] = bias[j] (or 0 without a bias): the start of a linear layer, finished by a GEMM with beta 1.
void fill_rows(float* out, const float* bias, int N, int OC, void* stream);
// dbias[j] += sum_n dout[n, j].
void bias_backward(float* dbias, const float* dout, int N, int OC, void* stream);

// Causal multi-head attention on qkv [N, 3C] (q, k, v side by side): att [B,H,T,T] gets the
// probabilities (0 above the diagonal), out [N, C] the heads' outputs side by side.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H, void* stream);
// dqkv is written (all of it); dscores [B,H,T,T] is scratch.
void attention_backward(float* dqkv, float* dscores, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int H, void* stream);

// GELU, tanh approximation: out = gelu(inp); dinp = gelu'(inp) * dout (written).
void gelu_forward(float* out, const float* inp, size_t n, void* stream);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, void* stream);

// out = a + b (the residual adds).
void add(float* out, const float* a, const float* b, size_t n, void* stream);

// Softmax of each logits row into probs; losses[n] = -log probs[n, targets[n]] (targets may be
// null: no losses).
void softmax_cross_entropy_forward(float* probs, float* losses, const float* logits, const int* targets, int N, int V,
                                   void* stream);
// dlogits = (probs - onehot(targets)) * scale / N (written).
void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int* targets, int N, int V, float scale,
                                    void* stream);

}  // namespace kolo::gpt::cuda

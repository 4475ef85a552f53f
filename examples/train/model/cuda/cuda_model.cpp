// CudaModel: Model<float>'s forward and backward (model.cpp), pass for pass, on the GPU.
// Row-major matrices meet column-major cuBLAS through the usual transposition: a row-major
// [R, K] matrix is a column-major [K, R] one, so out = inp W^T (row-major) is out^T = W inp^T
// in cuBLAS's terms, with W taken transposed (CUBLAS_OP_T) from its [IC, OC] column-major view.
#include "cuda_model.hpp"

#include <cublas_v2.h>

#include <stdexcept>
#include <string>

#include "cuda_layers.hpp"

namespace kolo::gpt {
namespace {

cublasHandle_t as_handle(void* h) { return static_cast<cublasHandle_t>(h); }

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS: ") + what + " failed: " + cublasGetStatusName(s) + ": " +
                             cublasGetStatusString(s));
}

}  // namespace

CudaModel::CudaModel(const Model<float>& host, int device)
    : config_(host.config()), layout_(host.layout()), total_(host.num_params()), device_(device) {
  cuda::set_device(device);
  stream_ = cuda::create_stream();
  try {
    cublasHandle_t handle = nullptr;
    check_cublas(cublasCreate(&handle), "cublasCreate");
    cublas_ = handle;
    check_cublas(cublasSetStream(handle, static_cast<cudaStream_t>(stream_)), "cublasSetStream");
    // Full float32 products (no TF32): the gradient test holds the model to 1e-4 of the double CPU model.
    check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    params_ = cuda::DeviceArray<float>(total_);
    grads_ = cuda::DeviceArray<float>(total_);
    upload_params(host.params());
    zero_grad();
    cuda::synchronize(stream_);
  } catch (...) {
    if (cublas_) cublasDestroy(as_handle(cublas_));
    cuda::destroy_stream(stream_);
    throw;
  }
}

CudaModel::~CudaModel() {
  try {
    cuda::synchronize(stream_);  // nothing queued may outlive the memory below
  } catch (...) {
  }
  cublasDestroy(as_handle(cublas_));
  cuda::destroy_stream(stream_);
}

void CudaModel::upload_params(const float* host) { cuda::upload(params_.get(), host, total_ * sizeof(float), stream_); }
void CudaModel::download_params(float* host) { cuda::download(host, params_.get(), total_ * sizeof(float), stream_); }
void CudaModel::download_grads(float* host) { cuda::download(host, grads_.get(), total_ * sizeof(float), stream_); }
void CudaModel::zero_grad() { cuda::zero(grads_.get(), total_ * sizeof(float), stream_); }

std::vector<float> CudaModel::logits() {
  std::vector<float> out(act_.logits.size());
  cuda::download(out.data(), act_.logits.get(), out.size() * sizeof(float), stream_);
  return out;
}

void CudaModel::resize_activations(int B, int T) {
  if (B == B_ && T == T_ && act_.encoded.get() != nullptr) return;
  // Only the memory of a finished step is dropped here: forward() is called between steps.
  cuda::synchronize(stream_);
  const size_t N = size_t(B) * T, H = config_.heads;
  act_.resize(config_, B, T);
  tokens_.resize(N);
  targets_.resize(N);
  losses_.resize(N);
  dscores_.resize(size_t(B) * H * T * T);
  host_losses_.resize(N);
}

void CudaModel::linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IC,
                               int OC) {
  cuda::fill_rows(out, bias, N, OC, stream_);  // then out += inp W^T
  const float one = 1.0f;
  check_cublas(cublasSgemm(as_handle(cublas_), CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, &one, weight, IC, inp, IC, &one,
                           out, OC),
               "cublasSgemm (linear forward)");
}

void CudaModel::linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                const float* weight, int N, int IC, int OC) {
  const float one = 1.0f, zero = 0.0f;
  if (dinp)  // dinp^T [IC, N] = W^T [IC, OC] dout^T [OC, N]
    check_cublas(cublasSgemm(as_handle(cublas_), CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, &one, weight, IC, dout, OC,
                             &zero, dinp, IC),
                 "cublasSgemm (linear backward, input)");
  // dW^T [IC, OC] += inp^T [IC, N] dout [N, OC]
  check_cublas(cublasSgemm(as_handle(cublas_), CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, &one, inp, IC, dout, OC, &one,
                           dweight, IC),
               "cublasSgemm (linear backward, weight)");
  if (dbias) cuda::bias_backward(dbias, dout, N, OC, stream_);
}

float CudaModel::forward(const int* tokens, const int* targets, int B, int T) {
  const Config& c = config_;
  if (!tokens) throw std::invalid_argument("gpt::CudaModel::forward: tokens is null");
  if (B < 1 || T < 1 || T > c.seq)
    throw std::invalid_argument("gpt::CudaModel::forward: need B >= 1 and 1 <= T <= seq (" + std::to_string(c.seq) +
                                "), got B=" + std::to_string(B) + " T=" + std::to_string(T));
  const size_t N = size_t(B) * T;
  for (size_t i = 0; i < N; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab || (targets && (targets[i] < 0 || targets[i] >= c.vocab)))
      throw std::invalid_argument("gpt::CudaModel::forward: token or target at position " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(c.vocab) + ")");
  resize_activations(B, T);
  B_ = B;
  T_ = T;
  has_targets_ = targets != nullptr;
  cuda::upload(tokens_.get(), tokens, N * sizeof(int), stream_);
  if (targets) cuda::upload(targets_.get(), targets, N * sizeof(int), stream_);

  const int C = c.dim, H = c.heads, NN = int(N);
  cuda::embedding_forward(act_.encoded.get(), tokens_.get(), param(0), param(1), NN, T, C, stream_);
  const float* x = act_.encoded.get();
  for (int l = 0; l < c.layers; ++l) {
    const size_t lnc = size_t(l) * N * C, ln = size_t(l) * N;
    float* ln1 = act_.ln1.get() + lnc;
    float* qkv = act_.qkv.get() + lnc * 3;
    float* att = act_.att.get() + size_t(l) * B * H * T * T;
    float* atty = act_.atty.get() + lnc;
    float* resid2 = act_.resid2.get() + lnc;
    float* ln2 = act_.ln2.get() + lnc;
    float* fch = act_.fch.get() + lnc * 4;
    float* fch_gelu = act_.fch_gelu.get() + lnc * 4;
    float* resid3 = act_.resid3.get() + lnc;
    auto p = [&](BlockParam k) { return param(block_param(l, k)); };

    cuda::layernorm_forward(ln1, act_.ln1_mean.get() + ln, act_.ln1_rstd.get() + ln, x, p(kLn1W), p(kLn1B), NN, C, stream_);
    linear_forward(qkv, ln1, p(kQkvW), p(kQkvB), NN, C, 3 * C);
    cuda::attention_forward(atty, att, qkv, B, T, C, H, stream_);
    linear_forward(act_.scratch.get(), atty, p(kAttnProjW), p(kAttnProjB), NN, C, C);
    cuda::add(resid2, x, act_.scratch.get(), N * C, stream_);

    cuda::layernorm_forward(ln2, act_.ln2_mean.get() + ln, act_.ln2_rstd.get() + ln, resid2, p(kLn2W), p(kLn2B), NN, C,
                            stream_);
    linear_forward(fch, ln2, p(kFcW), p(kFcB), NN, C, 4 * C);
    cuda::gelu_forward(fch_gelu, fch, N * 4 * C, stream_);
    linear_forward(act_.scratch.get(), fch_gelu, p(kMlpProjW), p(kMlpProjB), NN, 4 * C, C);
    cuda::add(resid3, resid2, act_.scratch.get(), N * C, stream_);
    x = resid3;
  }
  cuda::layernorm_forward(act_.lnf.get(), act_.lnf_mean.get(), act_.lnf_rstd.get(), x, param(lnf_weight()), param(lnf_bias()), NN,
                          C, stream_);
  linear_forward(act_.logits.get(), act_.lnf.get(), param(0), nullptr, NN, C, c.vocab);  // tied head
  cuda::softmax_cross_entropy_forward(act_.probs.get(), losses_.get(), act_.logits.get(), targets ? targets_.get() : nullptr,
                                      NN, c.vocab, stream_);
  cuda::check_launch("the forward kernels");
  if (!targets) return 0.0f;
  // N terms, summed in double on the host as the CPU model does.
  cuda::download(host_losses_.data(), losses_.get(), N * sizeof(float), stream_);
  double sum = 0;
  for (size_t i = 0; i < N; ++i) sum += double(host_losses_[i]);
  return float(sum / double(N));
}

void CudaModel::backward(float loss_scale, const std::function<void(size_t)>& on_ready) {
  if (B_ == 0 || !has_targets_)
    throw std::logic_error("gpt::CudaModel::backward: the last forward had no targets (nothing to differentiate)");
  const Config& c = config_;
  const int B = B_, T = T_, C = c.dim, H = c.heads, V = c.vocab, NN = B * T;
  const size_t N = size_t(NN);
  auto ready = [&](size_t i) {
    if (on_ready) on_ready(i);
  };

  // Head: loss -> logits -> lnf output (the wte gradient from here is not final yet).
  cuda::softmax_cross_entropy_backward(act_.dlogits.get(), act_.probs.get(), targets_.get(), NN, V, loss_scale, stream_);
  linear_backward(act_.dln.get(), grad(0), nullptr, act_.dlogits.get(), act_.lnf.get(), param(0), NN, C, V);
  cuda::zero(act_.dresid.get(), N * C * sizeof(float), stream_);
  const float* last = act_.resid3.get() + size_t(c.layers - 1) * N * C;
  cuda::layernorm_backward(act_.dresid.get(), grad(lnf_weight()), grad(lnf_bias()), act_.dln.get(), last, param(lnf_weight()),
                           act_.lnf_mean.get(), act_.lnf_rstd.get(), NN, C, stream_);
  ready(lnf_bias());
  ready(lnf_weight());

  for (int l = c.layers - 1; l >= 0; --l) {
    const size_t lnc = size_t(l) * N * C, ln = size_t(l) * N;
    const float* x = l == 0 ? act_.encoded.get() : act_.resid3.get() + lnc - N * C;
    const float* ln1 = act_.ln1.get() + lnc;
    const float* qkv = act_.qkv.get() + lnc * 3;
    const float* att = act_.att.get() + size_t(l) * B * H * T * T;
    const float* atty = act_.atty.get() + lnc;
    const float* resid2 = act_.resid2.get() + lnc;
    const float* ln2 = act_.ln2.get() + lnc;
    const float* fch = act_.fch.get() + lnc * 4;
    const float* fch_gelu = act_.fch_gelu.get() + lnc * 4;
    auto p = [&](BlockParam k) { return param(block_param(l, k)); };
    auto g = [&](BlockParam k) { return grad(block_param(l, k)); };
    auto ready_pair = [&](BlockParam bias, BlockParam weight) {
      ready(block_param(l, bias));
      ready(block_param(l, weight));
    };

    // MLP branch: resid3 = resid2 + mlp_proj(gelu(fc(ln2(resid2)))).
    linear_backward(act_.dfch_gelu.get(), g(kMlpProjW), g(kMlpProjB), act_.dresid.get(), fch_gelu, p(kMlpProjW), NN, 4 * C, C);
    ready_pair(kMlpProjB, kMlpProjW);
    cuda::gelu_backward(act_.dfch.get(), fch, act_.dfch_gelu.get(), N * 4 * C, stream_);
    linear_backward(act_.dln.get(), g(kFcW), g(kFcB), act_.dfch.get(), ln2, p(kFcW), NN, C, 4 * C);
    ready_pair(kFcB, kFcW);
    cuda::layernorm_backward(act_.dresid.get(), g(kLn2W), g(kLn2B), act_.dln.get(), resid2, p(kLn2W), act_.ln2_mean.get() + ln,
                             act_.ln2_rstd.get() + ln, NN, C, stream_);
    ready_pair(kLn2B, kLn2W);

    // Attention branch: resid2 = x + proj(attention(qkv(ln1(x)))).
    linear_backward(act_.datty.get(), g(kAttnProjW), g(kAttnProjB), act_.dresid.get(), atty, p(kAttnProjW), NN, C, C);
    ready_pair(kAttnProjB, kAttnProjW);
    cuda::attention_backward(act_.dqkv.get(), dscores_.get(), act_.datty.get(), qkv, att, B, T, C, H, stream_);
    linear_backward(act_.dln.get(), g(kQkvW), g(kQkvB), act_.dqkv.get(), ln1, p(kQkvW), NN, C, 3 * C);
    ready_pair(kQkvB, kQkvW);
    cuda::layernorm_backward(act_.dresid.get(), g(kLn1W), g(kLn1B), act_.dln.get(), x, p(kLn1W), act_.ln1_mean.get() + ln,
                             act_.ln1_rstd.get() + ln, NN, C, stream_);
    ready_pair(kLn1B, kLn1W);
  }

  cuda::embedding_backward(grad(0), grad(1), act_.dresid.get(), tokens_.get(), NN, T, C, stream_);
  cuda::check_launch("the backward kernels");
  ready(1);  // wpe
  ready(0);  // wte: both its uses (head and embedding) are in now
}

}  // namespace kolo::gpt

// The byte-level GPT of model.hpp on a CUDA GPU, float32: the same parameters in the same flat
// layout (so DDP buckets, checkpoints and the CPU model agree element for element), the same
// forward and backward, with cuBLAS for the matrix products and the kernels of cuda_layers.cu
// for the rest. Parameters, gradients and activations live in device memory; everything is
// queued on the model's own stream, which DDP (DdpOptions::stream) orders its all-reduces on.
//
// It is made from a CPU Model<float> (its layout and, copied, its initialised weights), so a
// seed gives the same weights on both.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "../activations.hpp"
#include "../config.hpp"
#include "../model.hpp"
#include "../param_index.hpp"
#include "cuda_support.hpp"

namespace kolo::gpt {

class CudaModel {
 public:
  // Makes the model on `device` (cudaSetDevice for the calling thread) with `host`'s config,
  // layout and current parameters. Throws std::runtime_error when CUDA fails.
  CudaModel(const Model<float>& host, int device);
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  const Config& config() const { return config_; }
  size_t num_params() const { return total_; }
  const std::vector<ParamInfo>& layout() const { return layout_; }
  int device() const { return device_; }
  void* stream() const { return stream_; }  // cudaStream_t
  float* params() { return params_.get(); }  // device memory
  float* grads() { return grads_.get(); }    // device memory

  void upload_params(const float* host);   // host -> params()
  void download_params(float* host);       // params() -> host, after the work queued so far
  void download_grads(float* host);        // grads() -> host, after the work queued so far

  // tokens, targets: host [B,T], as Model::forward. Returns the mean cross-entropy (0 without
  // targets); waits for the GPU to get there (the host needs the loss).
  float forward(const int* tokens, const int* targets, int B, int T);
  // As Model::backward: ADDS loss_scale * d(mean loss) into grads() and calls on_ready(i) in
  // strictly decreasing i once the work computing gradient i is queued (not run: whatever
  // on_ready queues on stream() runs after it).
  void backward(float loss_scale, const std::function<void(size_t)>& on_ready);
  void zero_grad();
  // The logits of the last forward, [B,T,vocab], to the host.
  std::vector<float> logits();

 private:
  size_t lnf_weight() const { return gpt::lnf_weight(config_); }
  size_t lnf_bias() const { return gpt::lnf_bias(config_); }
  float* param(size_t i) { return params_.get() + layout_[i].offset; }
  float* grad(size_t i) { return grads_.get() + layout_[i].offset; }
  void resize_activations(int B, int T);
  // out[N,OC] = inp[N,IC] W^T (+ bias), W [OC,IC] row-major (torch.nn.Linear).
  void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IC, int OC);
  // dinp = dout W (written; null: skipped), dW += dout^T inp, dbias += column sums of dout.
  void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int IC, int OC);

  Config config_;
  std::vector<ParamInfo> layout_;
  size_t total_ = 0;
  int device_ = 0;
  void* stream_ = nullptr;
  void* cublas_ = nullptr;  // cublasHandle_t
  cuda::DeviceArray<float> params_, grads_;

  int B_ = 0, T_ = 0;
  bool has_targets_ = false;
  cuda::DeviceArray<int> tokens_, targets_;
  Activations<cuda::DeviceArray<float>> act_;  // of the last forward, as in Model
  cuda::DeviceArray<float> losses_;    // [N] per-position cross-entropy
  cuda::DeviceArray<float> dscores_;   // [B,H,T,T] one block's attention score gradients
  std::vector<float> host_losses_;
};

}  // namespace kolo::gpt

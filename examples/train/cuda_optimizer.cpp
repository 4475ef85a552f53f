// --device cuda (built only with CUDA): the model on this rank's GPU (gpt::CudaModel, device
// LOCAL_RANK % visible devices), DistributedDataParallel over its gradients in device memory
// (DdpOptions::device, ordered on the model's stream), then clipping and AdamW on the GPU,
// computed as the CPU's (grad_clip.cpp, adamw.cpp). The CPU Model<float> the trainer keeps is
// the GPU model's host mirror: its weights are the starting point (init or --resume, uploaded
// here) and are refreshed from the GPU by params_to_host() before evaluation, checkpoints and
// the final sample, which run on the host.
#include <cmath>

#include "grad_clip.hpp"
#include "model/cuda/cuda_model.hpp"
#include "model/cuda/cuda_optim.hpp"
#include "parallel_optimizer.hpp"
#include "train_step.hpp"
#include "weight_decay_policy.hpp"

namespace kolo::train {
namespace {

DdpOptions cuda_ddp_options(const TrainOptions& opt, const gpt::CudaModel& model) {
  DdpOptions d = ddp_options(opt);
  d.device = Device::cuda(model.device());
  d.stream = model.stream();
  return d;
}

class CudaOptimizer final : public DataParallelOptimizer {
 public:
  CudaOptimizer(const TrainOptions& opt, std::shared_ptr<ProcessGroup> group, gpt::Model<float>& host,
                const AdamState* resumed, int device)
      : host_(host),
        model_(host, device),
        ddp_(std::move(group), model_.params(), model_.grads(), model_.num_params(), ddp_layout(model_.layout()),
             cuda_ddp_options(opt, model_)),
        ranges_(decay_ranges(model_.layout())),
        config_(adamw_config(opt)),
        m_(model_.num_params()),
        v_(model_.num_params()) {
    const size_t bytes = model_.num_params() * sizeof(float);
    gpt::cuda::zero(m_.get(), bytes, model_.stream());
    gpt::cuda::zero(v_.get(), bytes, model_.stream());
    if (resumed != nullptr) {
      gpt::cuda::upload(m_.get(), resumed->m.data(), bytes, model_.stream());
      gpt::cuda::upload(v_.get(), resumed->v.data(), bytes, model_.stream());
      steps_ = resumed->steps;
    }
    gpt::cuda::synchronize(model_.stream());
  }

  double forward_backward(const TokenWindows& windows, const std::vector<size_t>& samples, size_t global_batch,
                          int accum) override {
    return train::forward_backward(model_, ddp_, windows, samples, global_batch, accum);
  }

  // Queued behind finish()'s wait for the all-reduces; the norm's read-back waits for them.
  double update(double lr, double clip) override {
    const size_t n = model_.num_params();
    void* stream = model_.stream();
    const double norm = std::sqrt(gpt::cuda::sum_of_squares(model_.grads(), n, stream));
    if (const float s = clip_scale(norm, clip); s != 1.0f) gpt::cuda::scale(model_.grads(), n, s, stream);
    // As AdamW::step (adamw.cpp).
    ++steps_;
    const double t = static_cast<double>(steps_);
    gpt::cuda::AdamWStep step{};
    step.beta1 = config_.beta1;
    step.beta2 = config_.beta2;
    step.eps = config_.eps;
    step.step_size = float(lr) / static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta1), t));
    step.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(config_.beta2), t)));
    for (const DecayRange& r : ranges_) {
      step.shrink = r.decay ? 1.0f - float(lr) * config_.weight_decay : 1.0f;
      gpt::cuda::adamw(model_.params() + r.offset, model_.grads() + r.offset, m_.get() + r.state_begin(),
                       v_.get() + r.state_begin(), r.count, step, stream);
    }
    gpt::cuda::check_launch("AdamW");
    return norm;
  }

  DistributedDataParallel::StepStats comm_stats() const override { return ddp_.last_step_stats(); }

  AdamState state_on_rank0() override {
    if (ddp_.group().rank() != 0) return {};
    AdamState state{steps_, std::vector<float>(model_.num_params()), std::vector<float>(model_.num_params())};
    gpt::cuda::download(state.m.data(), m_.get(), state.m.size() * sizeof(float), model_.stream());
    gpt::cuda::download(state.v.data(), v_.get(), state.v.size() * sizeof(float), model_.stream());
    return state;
  }

  void params_to_host() override { model_.download_params(host_.params()); }

  size_t bucket_count() const override { return ddp_.bucket_count(); }
  size_t state_bytes() const override { return 2 * model_.num_params() * sizeof(float); }
  const char* mode() const override { return "DDP (cuda)"; }

 private:
  gpt::Model<float>& host_;
  gpt::CudaModel model_;
  DistributedDataParallel ddp_;  // after model_: destroyed first, while the gradients still exist
  std::vector<DecayRange> ranges_;
  AdamWConfig config_;
  uint64_t steps_ = 0;
  gpt::cuda::DeviceArray<float> m_, v_;
};

}  // namespace

std::unique_ptr<DataParallelOptimizer> make_cuda_optimizer(const TrainOptions& opt, std::shared_ptr<ProcessGroup> group,
                                                           gpt::Model<float>& model, const AdamState* resumed,
                                                           int device) {
  return std::make_unique<CudaOptimizer>(opt, std::move(group), model, resumed, device);
}

}  // namespace kolo::train

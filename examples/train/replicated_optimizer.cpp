// --zero 0: DistributedDataParallel and one AdamW over the whole model on every rank. After the
// all-reduce every rank holds the same averaged gradients, so the local norm is the global one
// and every rank computes the same update.
#include "grad_clip.hpp"
#include "parallel_optimizer.hpp"
#include "train_step.hpp"
#include "weight_decay_policy.hpp"

namespace kolo::train {
namespace {

class ReplicatedOptimizer final : public DataParallelOptimizer {
 public:
  ReplicatedOptimizer(const TrainOptions& opt, std::shared_ptr<ProcessGroup> group, gpt::Model<float>& model,
                      const AdamState* resumed)
      : model_(model),
        ddp_(std::move(group), model.params(), model.grads(), model.num_params(), ddp_layout(model.layout()),
             ddp_options(opt)),
        adamw_(model.num_params(), decay_ranges(model.layout()), adamw_config(opt)) {
    if (resumed == nullptr) return;
    adamw_.first_moment() = resumed->m;
    adamw_.second_moment() = resumed->v;
    adamw_.set_steps(resumed->steps);
  }

  double forward_backward(const TokenWindows& windows, const std::vector<size_t>& samples, size_t global_batch,
                          int accum) override {
    return train::forward_backward(model_, ddp_, windows, samples, global_batch, accum);
  }

  double update(double lr, double clip) override {
    const double norm = clip_grad_norm(model_.grads(), model_.num_params(), clip);
    adamw_.step(model_.params(), model_.grads(), float(lr));
    return norm;
  }

  DistributedDataParallel::StepStats comm_stats() const override { return ddp_.last_step_stats(); }

  AdamState state_on_rank0() override {
    if (ddp_.group().rank() != 0) return {};
    return {adamw_.steps(), adamw_.first_moment(), adamw_.second_moment()};
  }

  std::optional<AdamState> whole_state_here() override {
    return AdamState{adamw_.steps(), adamw_.first_moment(), adamw_.second_moment()};
  }

  size_t bucket_count() const override { return ddp_.bucket_count(); }
  size_t state_bytes() const override { return 2 * adamw_.state_size() * sizeof(float); }
  const char* mode() const override { return "DDP"; }

 private:
  gpt::Model<float>& model_;
  DistributedDataParallel ddp_;
  AdamW adamw_;
};

}  // namespace

std::unique_ptr<DataParallelOptimizer> make_replicated_optimizer(const TrainOptions& opt,
                                                                 std::shared_ptr<ProcessGroup> group,
                                                                 gpt::Model<float>& model, const AdamState* resumed) {
  return std::make_unique<ReplicatedOptimizer>(opt, std::move(group), model, resumed);
}

}  // namespace kolo::train

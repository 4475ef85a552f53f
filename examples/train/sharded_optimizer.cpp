// --zero 1: ShardedDataParallel and an AdamW over this rank's shard only. The gradients are
// reduce-scattered, the global norm comes from the shards' squared norms (one all-reduce), each
// rank clips and updates its shard, and the new weights are all-gathered. Checkpoints hold the
// whole state: gathered to rank 0 to save, and each rank takes its shard of a loaded one.
#include <chrono>

#include "grad_clip.hpp"
#include "kolo/sharded_ddp.hpp"
#include "parallel_optimizer.hpp"
#include "train_step.hpp"
#include "weight_decay_policy.hpp"

namespace kolo::train {
namespace {

class ShardedOptimizer final : public DataParallelOptimizer {
 public:
  ShardedOptimizer(const TrainOptions& opt, std::shared_ptr<ProcessGroup> group, gpt::Model<float>& model,
                   const AdamState* resumed)
      : model_(model),
        zero_(std::move(group), model.params(), model.grads(), model.num_params(), ddp_layout(model.layout()),
              ddp_options(opt)),
        adamw_(zero_.shard_elements(), shard_decay_ranges(decay_ranges(model.layout()), zero_.shard()),
               adamw_config(opt)) {
    if (resumed == nullptr) return;
    zero_.take_shard(resumed->m.data(), adamw_.first_moment().data());
    zero_.take_shard(resumed->v.data(), adamw_.second_moment().data());
    adamw_.set_steps(resumed->steps);
  }

  double forward_backward(const TokenWindows& windows, const std::vector<size_t>& samples, size_t global_batch,
                          int accum) override {
    return train::forward_backward(model_, zero_, windows, samples, global_batch, accum);
  }

  double update(double lr, double clip) override {
    const double norm = zero_.grad_norm();
    if (const float scale = clip_scale(norm, clip); scale != 1.0f)
      for (const ShardRange& r : zero_.shard())
        for (size_t i = r.offset; i < r.offset + r.count; ++i) model_.grads()[i] *= scale;
    adamw_.step(model_.params(), model_.grads(), float(lr));  // touches the shard only
    const auto gather_start = std::chrono::steady_clock::now();
    zero_.gather_params();
    gather_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - gather_start).count();
    return norm;
  }

  // The all-gather is waited for at once, so all of it is exposed; it is counted with the
  // reduce-scatters so that the step line compares with DDP's all-reduce.
  DistributedDataParallel::StepStats comm_stats() const override {
    DistributedDataParallel::StepStats stats = zero_.last_step_stats();
    stats.comm_seconds += gather_seconds_;
    stats.exposed_wait_seconds += gather_seconds_;
    return stats;
  }

  AdamState state_on_rank0() override {
    const bool root = zero_.group().rank() == 0;
    AdamState state;
    if (root) {
      state.steps = adamw_.steps();
      state.m.assign(model_.num_params(), 0.0f);
      state.v.assign(model_.num_params(), 0.0f);
    }
    zero_.gather_state(adamw_.first_moment().data(), root ? state.m.data() : nullptr);
    zero_.gather_state(adamw_.second_moment().data(), root ? state.v.data() : nullptr);
    return state;
  }

  size_t bucket_count() const override { return zero_.bucket_count(); }
  size_t state_bytes() const override { return 2 * adamw_.state_size() * sizeof(float); }
  const char* mode() const override { return "ZeRO-1"; }

 private:
  gpt::Model<float>& model_;
  ShardedDataParallel zero_;
  AdamW adamw_;
  double gather_seconds_ = 0;  // of the last update()
};

}  // namespace

std::unique_ptr<DataParallelOptimizer> make_sharded_optimizer(const TrainOptions& opt,
                                                              std::shared_ptr<ProcessGroup> group,
                                                              gpt::Model<float>& model, const AdamState* resumed) {
  return std::make_unique<ShardedOptimizer>(opt, std::move(group), model, resumed);
}

}  // namespace kolo::train

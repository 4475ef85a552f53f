// The two ways kolo-train turns each rank's gradients into the same new weights everywhere:
//   --zero 0  DistributedDataParallel all-reduces the gradients; every rank runs AdamW on the
//             whole model, so every rank holds all of AdamW's state (2 floats per parameter).
//   --zero 1  ShardedDataParallel reduce-scatters them; each rank runs AdamW on its shard only
//             (1/P of the state), and the updated weights are all-gathered (ZeRO stage 1).
// Both compute the same thing up to the order of floating-point sums, and both save and resume
// the same full-state checkpoints, so a run can change mode across a resume.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "adamw.hpp"
#include "corpus.hpp"
#include "kolo/ddp.hpp"
#include "kolo/process_group.hpp"
#include "model/model.hpp"
#include "train_options.hpp"

namespace kolo::train {

// AdamW's whole state, flat (one moment per parameter), as checkpoints hold it.
struct AdamState {
  uint64_t steps = 0;
  std::vector<float> m, v;
};

class DataParallelOptimizer {
 public:
  virtual ~DataParallelOptimizer() = default;
  // One step's forward/backward over this rank's share of the global batch (`samples`, in
  // `accum` micro-batches), then the gradient reduction (train_step.hpp). Returns this rank's
  // mean loss.
  virtual double forward_backward(const TokenWindows& windows, const std::vector<size_t>& samples,
                                  size_t global_batch, int accum) = 0;
  // Clips the averaged gradient by its global norm (clip <= 0: off) and applies AdamW with
  // learning rate lr; afterwards every rank holds the same weights. Returns the norm before clipping.
  virtual double update(double lr, double clip) = 0;
  virtual DistributedDataParallel::StepStats comm_stats() const = 0;
  // Collective: the whole AdamW state on rank 0 (empty moments elsewhere).
  virtual AdamState state_on_rank0() = 0;
  // Not collective: a copy of the whole AdamW state when this rank holds all of it (--zero 0 on
  // the host), for kolo-train --elastic's rollback in memory; nullopt when it holds a shard.
  virtual std::optional<AdamState> whole_state_here() { return std::nullopt; }
  virtual size_t bucket_count() const = 0;
  virtual size_t state_bytes() const = 0;  // this rank's AdamW moments
  virtual const char* mode() const = 0;    // for the banner
  // --device cuda: copies the GPU's weights into the trainer's host model (its mirror) before
  // evaluation, checkpoints and sampling. Host optimizers train the host model itself: nothing to do.
  virtual void params_to_host() {}
};

// Collective (the reducer checks the layouts and broadcasts rank 0's weights). `resumed`: the
// state of a checkpoint to continue from, or nullptr for a fresh AdamW.
std::unique_ptr<DataParallelOptimizer> make_data_parallel_optimizer(const TrainOptions& opt,
                                                                    std::shared_ptr<ProcessGroup> group,
                                                                    gpt::Model<float>& model,
                                                                    const AdamState* resumed);

// Shared by both modes (parallel_optimizer.cpp).
DdpOptions ddp_options(const TrainOptions& opt);
std::vector<DdpParam> ddp_layout(const std::vector<gpt::ParamInfo>& layout);
AdamWConfig adamw_config(const TrainOptions& opt);

std::unique_ptr<DataParallelOptimizer> make_replicated_optimizer(const TrainOptions& opt,
                                                                 std::shared_ptr<ProcessGroup> group,
                                                                 gpt::Model<float>& model, const AdamState* resumed);
// --device cuda (cuda_optimizer.cpp, in builds with CUDA only): the model on GPU `device`,
// initialised from `model`'s weights, which it then mirrors (params_to_host).
std::unique_ptr<DataParallelOptimizer> make_cuda_optimizer(const TrainOptions& opt, std::shared_ptr<ProcessGroup> group,
                                                           gpt::Model<float>& model, const AdamState* resumed,
                                                           int device);
std::unique_ptr<DataParallelOptimizer> make_sharded_optimizer(const TrainOptions& opt,
                                                              std::shared_ptr<ProcessGroup> group,
                                                              gpt::Model<float>& model, const AdamState* resumed);

}  // namespace kolo::train

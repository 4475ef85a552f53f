// Which sample windows each rank trains on, like torch's DistributedSampler.
//
// Every epoch, all ranks shuffle the indices 0..num_samples-1 the same way (the permutation
// depends only on the seed and the epoch). An optimizer step consumes the next `global_batch`
// positions of that order; rank r takes positions r, r+K, r+2K, ... of them (K ranks). So the
// samples of one step, over all ranks, do not depend on how many ranks share them: K ranks with
// a local batch of b see exactly the samples that 1 rank with a batch of K*b sees. With gradient
// accumulation the rank's share is cut into consecutive micro-batches. An epoch ends when fewer
// than global_batch positions are left (those are dropped, as with drop_last). With uneven shares
// (kolo-train --elastic, after a rank was lost) the global batch need not divide by the ranks:
// the same rule gives rank r the positions r, r+K, ... below global_batch, so shares differ by at
// most one sample and the step's samples are still those of the full group.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kolo::train {

// Where the sampler stands: saved in checkpoints. `next` counts positions of the epoch's order
// already handed out (over all ranks).
struct SamplerPosition {
  uint64_t epoch = 0;
  uint64_t next = 0;
};

class DistributedSampler {
 public:
  // global_batch = ranks * local batch * accumulation steps; it must be a multiple of world_size
  // (or, with uneven_shares, at least world_size) and at most num_samples (throws
  // kolo::InvalidArgument otherwise).
  DistributedSampler(size_t num_samples, uint64_t seed, int rank, int world_size, size_t global_batch,
                     bool uneven_shares = false);

  // This rank's sample indices for the next optimizer step (share() of them, in micro-batch
  // order), advancing the position.
  std::vector<size_t> next_step();
  // How many samples of each step this rank takes: global_batch / world_size, or with uneven
  // shares one more on the first global_batch % world_size ranks.
  size_t share() const;

  SamplerPosition position() const { return position_; }
  void set_position(const SamplerPosition& position);

  size_t steps_per_epoch() const { return num_samples_ / global_batch_; }
  // The permutation used in `epoch` (exposed for tests).
  std::vector<size_t> epoch_order(uint64_t epoch) const;

 private:
  const std::vector<size_t>& order_for(uint64_t epoch);

  size_t num_samples_;
  uint64_t seed_;
  int rank_;
  int world_size_;
  size_t global_batch_;
  SamplerPosition position_;
  uint64_t cached_epoch_ = UINT64_MAX;
  std::vector<size_t> cached_order_;
};

}  // namespace kolo::train

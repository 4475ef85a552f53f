// kolo::ShardedDataParallel: data parallelism with the optimizer state sharded over the ranks
// (ZeRO stage 1, as DeepSpeed and torch's ZeroRedundancyOptimizer do it).
//
// It is DistributedDataParallel's reducer (the same bucket plan, marks, launch order, overlap with
// backward, no_sync and compression hooks) with a reduce-scatter (average) per bucket instead of
// an all-reduce: after finish() each rank holds the averaged gradients of its shard only. The
// caller updates the parameters of its shard with an optimizer whose state covers the shard
// alone (1/P of the whole), then gather_params() all-gathers the updated parameters so that every
// rank holds the whole model again. Reduce-scatter + all-gather move the bytes of one all-reduce.
//
// Sharding is per bucket: a bucket of n elements splits into P chunks of floor(n/P) elements,
// chunk r owned by rank r, plus a tail of n mod P (< P) elements that every rank all-reduces and
// updates identically (so any rank count works without padding the caller's buffers; the tail is
// at most P-1 elements per bucket).
#pragma once
#include <memory>
#include <vector>

#include "kolo/ddp.hpp"

namespace kolo {

// An element range of the flat buffers that belongs to a rank's shard. `replicated`: a bucket's
// tail, held and updated by every rank.
struct ShardRange {
  size_t offset = 0;
  size_t count = 0;
  bool replicated = false;
};

// How a bucket of `count` elements splits over `ranks`: chunk r is [r*chunk, (r+1)*chunk) of the
// bucket, the tail [ranks*chunk, count).
struct BucketSplit {
  size_t chunk = 0;
  size_t tail = 0;
};
BucketSplit split_bucket(size_t count, int ranks);

// Rank `rank`'s shard of a bucket plan, in bucket order: for each bucket its chunk (if not empty)
// then its tail (if any). Pure: the same on every rank. A shard's optimizer state is laid out in
// this order (ShardedDataParallel::take_shard / gather_state).
std::vector<ShardRange> plan_shard(const std::vector<DdpBucket>& buckets, int rank, int ranks);

// Not thread-safe; the same rules as DistributedDataParallel for mark_grad_ready/finish/no_sync.
class ShardedDataParallel {
 public:
  // Collective, as DistributedDataParallel's constructor (layout agreement, rank 0's params
  // broadcast). A rank running DistributedDataParallel against one running this is refused by
  // the layout agreement (MismatchError).
  ShardedDataParallel(std::shared_ptr<ProcessGroup> group, float* params, float* grads, size_t total,
                      std::vector<DdpParam> layout, DdpOptions opts = {});
  ~ShardedDataParallel();
  ShardedDataParallel(const ShardedDataParallel&) = delete;
  ShardedDataParallel& operator=(const ShardedDataParallel&) = delete;

  // As DistributedDataParallel's, with a reduce-scatter per bucket: after finish() the ranges of
  // shard() hold the average over ranks; the rest of grads holds partial sums (do not use it).
  void mark_grad_ready(size_t param_index);
  void finish();
  DistributedDataParallel::NoSync no_sync();

  // This rank's shard, and its element count (the size of the optimizer state per moment).
  const std::vector<ShardRange>& shard() const;
  size_t shard_elements() const;

  // Collective: the L2 norm of the whole averaged gradient, from each shard's sum of squares
  // (in double; a tail counted on rank 0 only) and one all-reduce. Call after finish().
  double grad_norm();
  // Collective: every bucket's chunks of params are all-gathered in place (in float32), so each
  // rank's updates reach all ranks. Call after updating the shard.
  void gather_params();

  // Per-shard state (shard_elements() floats, in shard() order) from / to a flat buffer of
  // `total` elements, for checkpoints. take_shard is local; gather_state is collective and fills
  // `full` on `root` only (others may pass nullptr); elements outside every bucket are left alone.
  void take_shard(const float* full, float* shard_state) const;
  void gather_state(const float* shard_state, float* full, int root = 0);

  DistributedDataParallel::StepStats last_step_stats() const;  // of the last finish()
  size_t bucket_count() const;
  const std::vector<DdpBucket>& buckets() const;
  ProcessGroup& group() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kolo

// kolo::DistributedDataParallel: a thin data-parallel gradient averager over a ProcessGroup,
// modelled on torch.nn.parallel.DistributedDataParallel's reducer.
//
// The model keeps its parameters and gradients in two flat float32 buffers. Parameters are
// grouped into buckets in REVERSE order (the last layers' gradients are ready first in backward),
// each bucket being one contiguous range of the gradient buffer that is all-reduced in place
// (gradient-as-bucket-view: no copy). A bucket's asynchronous all-reduce (average) starts as soon
// as backward has marked all its parameters ready, so communication overlaps the rest of backward;
// finish() waits for what is still in flight.
//
// Buckets are launched strictly in bucket order (bucket k only after buckets 0..k-1), whatever
// order the marks come in, so every rank issues the same collectives in the same order.
//
// kolo/sharded_ddp.hpp's ShardedDataParallel (ZeRO-1) runs this reducer with a reduce-scatter per
// bucket instead, for optimizers whose state is sharded over the ranks.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kolo/process_group.hpp"

namespace kolo {

// One parameter tensor: an element range [offset, offset+count) of the flat buffers.
struct DdpParam {
  std::string name;
  size_t offset = 0;
  size_t count = 0;
};

enum class GradCompression { none, float16, bfloat16 };  // the communication hook

struct DdpOptions {
  size_t first_bucket_bytes = size_t(1) << 20;  // first bucket ~1 MiB (closest to the loss)
  size_t bucket_bytes = size_t(25) << 20;       // later buckets ~25 MiB
  GradCompression compression = GradCompression::none;
  std::chrono::milliseconds timeout{0};  // 0: the group's default
  // Where params and grads live. Device::cuda(i): device memory, broadcast and all-reduced as
  // device Buffers ordered on `stream` (a cudaStream_t as void*; nullptr: the legacy default
  // stream; README "GPU buffers"): a bucket's all-reduce starts after the work queued on `stream`
  // before its last mark, and finish() makes `stream` wait for the averages without blocking
  // the host (as torch DDP over NCCL). Device buffers take no compression and no sharding (refused).
  Device device = Device::cpu();
  void* stream = nullptr;
};

// One bucket of the plan: parameters (indices into the layout, in the order they were added,
// i.e. descending) and the element range of the flat buffers it covers. The range runs from the
// lowest parameter's offset to the end of the highest one; gaps between parameters (padding)
// lie inside it and are averaged with it.
struct DdpBucket {
  std::vector<size_t> params;
  size_t offset = 0;
  size_t count = 0;
};

// The bucket plan DistributedDataParallel uses (a pure function: the same inputs give the same
// plan on every rank). Parameters are taken in reverse order; a bucket closes as soon as its
// range reaches first_bucket_bytes (the first bucket) or bucket_bytes (later ones) of float32;
// a parameter is never split. Throws InvalidArgument unless the layout lists parameters in
// ascending, non-overlapping order within [0, total).
std::vector<DdpBucket> plan_ddp_buckets(const std::vector<DdpParam>& layout, size_t total, const DdpOptions& opts);

// Not thread-safe: call mark_grad_ready/finish/no_sync from one thread (typically the one that
// runs backward). Between marking a parameter and finish(), its bucket's range of `grads` belongs
// to the all-reduce: do not write to it. params/grads must outlive the object.
class DistributedDataParallel {
 public:
  // Collective. params/grads: flat float32 buffers of `total` elements (host memory, or device
  // memory when opts.device says so); `layout` lists the
  // parameters in forward (creation) order, covering disjoint ranges. Checks that every rank has the
  // same layout (throws kolo::MismatchError naming the first difference and the ranks), then
  // broadcasts rank 0's params. Buckets: parameters in REVERSE order, fixed and identical on every rank;
  // each bucket is a contiguous range of `grads` (gradient-as-bucket-view: no copy).
  DistributedDataParallel(std::shared_ptr<ProcessGroup> group, float* params, float* grads, size_t total,
                          std::vector<DdpParam> layout, DdpOptions opts = {});
  // Waits (briefly) for buckets still in flight, aborting the group if they do not complete, so
  // nothing writes into grads afterwards; never throws.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Backward produced parameter i's final gradient for this step. When every parameter of a
  // bucket is ready, that bucket's asynchronous all-reduce (average over ranks) starts at once
  // (once the buckets before it have started). Marking a parameter twice in one step, or an
  // index outside the layout, throws InvalidArgument.
  void mark_grad_ready(size_t param_index);
  // Marks anything not yet marked, waits for every bucket; afterwards grads hold the average
  // over ranks. Resets the per-step state. Throws the collective's error (peer died, timeout).
  void finish();

  // While a NoSync is alive, mark_grad_ready/finish do not communicate (gradients accumulate
  // locally, for gradient accumulation); the first step after it communicates the sums.
  class NoSync {
   public:
    NoSync(NoSync&& other) noexcept;
    NoSync& operator=(NoSync&& other) noexcept;
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    ~NoSync();

   private:
    friend class DistributedDataParallel;
    explicit NoSync(DistributedDataParallel* owner) : owner_(owner) {}
    void release() noexcept;
    DistributedDataParallel* owner_ = nullptr;
  };
  // Throws InvalidArgument when called in the middle of a step (after a mark, before finish()).
  NoSync no_sync();

  // Device buffers: finish() does not block, so comm_seconds counts only the buckets already
  // complete on the host when it returns, and exposed_wait_seconds is about 0.
  struct StepStats {
    double comm_seconds = 0;          // sum over buckets of all-reduce start .. completion
    double exposed_wait_seconds = 0;  // time finish() spent blocked on communication
    size_t buckets = 0;               // buckets all-reduced in the step (0 for a no_sync step)
    size_t bytes = 0;                 // bytes all-reduced per rank (in the compressed dtype, if any)
  };
  StepStats last_step_stats() const;  // of the last finish()
  size_t bucket_count() const;

  // Additions for tests and tools.
  const std::vector<DdpBucket>& buckets() const;
  // Buckets of the current step whose all-reduce has been issued / has completed (successfully
  // or not), without waiting. Reset by finish().
  size_t launched_buckets() const;
  size_t completed_buckets() const;
  ProcessGroup& group() const;

 private:
  // ShardedDataParallel runs this reducer with reduce-scatters instead of all-reduces: the same
  // buckets, marks, launch order, no_sync and error handling, a different collective per bucket.
  friend class ShardedDataParallel;
  enum class Reduction { allreduce, reduce_scatter };
  DistributedDataParallel(std::shared_ptr<ProcessGroup> group, float* params, float* grads, size_t total,
                          std::vector<DdpParam> layout, DdpOptions opts, Reduction reduction);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kolo

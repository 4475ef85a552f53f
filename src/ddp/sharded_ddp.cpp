// ShardedDataParallel: DistributedDataParallel's reducer in reduce-scatter mode, plus what a
// sharded optimizer needs around it: the shard, the global gradient norm, the all-gather of the
// updated parameters and the state transfers for checkpoints.
#include "kolo/sharded_ddp.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

#include "kolo/error.hpp"

namespace kolo {

namespace {

// Waits for every Work (they write into the caller's buffers, so none may be left running),
// then rethrows the first error.
void wait_all(const std::vector<WorkPtr>& works) {
  std::exception_ptr error;
  for (const WorkPtr& w : works) {
    try {
      w->wait();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

struct ShardedDataParallel::Impl {
  std::unique_ptr<DistributedDataParallel> reducer;
  float* params = nullptr;
  float* grads = nullptr;
  DdpOptions opts;
  std::vector<ShardRange> shard;
  size_t shard_elements = 0;
};

ShardedDataParallel::ShardedDataParallel(std::shared_ptr<ProcessGroup> group, float* params, float* grads,
                                         size_t total, std::vector<DdpParam> layout, DdpOptions opts)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  // Not make_unique: the reduce-scatter constructor is private to DistributedDataParallel.
  s.reducer.reset(new DistributedDataParallel(std::move(group), params, grads, total, std::move(layout), opts,
                                              DistributedDataParallel::Reduction::reduce_scatter));
  s.params = params;
  s.grads = grads;
  s.opts = opts;
  ProcessGroup& g = s.reducer->group();
  s.shard = plan_shard(s.reducer->buckets(), g.rank(), g.size());
  for (const ShardRange& r : s.shard) s.shard_elements += r.count;
}

ShardedDataParallel::~ShardedDataParallel() = default;

void ShardedDataParallel::mark_grad_ready(size_t param_index) { impl_->reducer->mark_grad_ready(param_index); }
void ShardedDataParallel::finish() { impl_->reducer->finish(); }
DistributedDataParallel::NoSync ShardedDataParallel::no_sync() { return impl_->reducer->no_sync(); }
const std::vector<ShardRange>& ShardedDataParallel::shard() const { return impl_->shard; }
size_t ShardedDataParallel::shard_elements() const { return impl_->shard_elements; }
DistributedDataParallel::StepStats ShardedDataParallel::last_step_stats() const {
  return impl_->reducer->last_step_stats();
}
size_t ShardedDataParallel::bucket_count() const { return impl_->reducer->bucket_count(); }
const std::vector<DdpBucket>& ShardedDataParallel::buckets() const { return impl_->reducer->buckets(); }
ProcessGroup& ShardedDataParallel::group() const { return impl_->reducer->group(); }

double ShardedDataParallel::grad_norm() {
  Impl& s = *impl_;
  const bool counts_tails = group().rank() == 0;  // every rank holds the tails: count them once
  double sum = 0;
  for (const ShardRange& r : s.shard) {
    if (r.replicated && !counts_tails) continue;
    for (size_t i = r.offset; i < r.offset + r.count; ++i) sum += static_cast<double>(s.grads[i]) * s.grads[i];
  }
  AllreduceOptions o;
  o.op = ReduceKind::sum;
  o.timeout = s.opts.timeout;
  group().allreduce(Buffer(&sum, 1), o)->wait();
  return std::sqrt(sum);
}

void ShardedDataParallel::gather_params() {
  Impl& s = *impl_;
  ProcessGroup& g = group();
  const size_t rank = static_cast<size_t>(g.rank()), ranks = static_cast<size_t>(g.size());
  AllgatherOptions o;
  o.timeout = s.opts.timeout;
  o.overlap = true;
  std::vector<WorkPtr> works;
  for (const DdpBucket& b : buckets()) {
    const BucketSplit split = split_bucket(b.count, g.size());
    if (split.chunk == 0) continue;  // a tail only: every rank updated it alike
    float* base = s.params + b.offset;
    // In place: this rank's chunk is already where the gathered bucket puts it.
    works.push_back(g.allgather(Buffer(base + rank * split.chunk, split.chunk), Buffer(base, split.chunk * ranks), o));
  }
  wait_all(works);
}

void ShardedDataParallel::take_shard(const float* full, float* shard_state) const {
  for (const ShardRange& r : impl_->shard) shard_state = std::copy(full + r.offset, full + r.offset + r.count, shard_state);
}

// Bucket by bucket: gathering the chunks (equal on every rank) to the root lays them out as the
// flat buffer does, so they land in `full` directly; the root copies the tails from its own state.
void ShardedDataParallel::gather_state(const float* shard_state, float* full, int root) {
  ProcessGroup& g = group();
  const bool is_root = g.rank() == root;
  if (is_root && full == nullptr) throw InvalidArgument("kolo: ShardedDataParallel::gather_state: full is null on the root");
  const size_t ranks = static_cast<size_t>(g.size());
  GatherOptions o;
  o.root = root;
  o.timeout = impl_->opts.timeout;
  std::vector<WorkPtr> works;
  for (const DdpBucket& b : buckets()) {
    const BucketSplit split = split_bucket(b.count, g.size());
    if (split.chunk > 0) {
      const Buffer recv = is_root ? Buffer(full + b.offset, split.chunk * ranks) : Buffer();
      works.push_back(g.gather(Buffer(shard_state, split.chunk), recv, o));
      shard_state += split.chunk;
    }
    if (is_root) std::copy(shard_state, shard_state + split.tail, full + b.offset + split.chunk * ranks);
    shard_state += split.tail;
  }
  wait_all(works);
}

}  // namespace kolo

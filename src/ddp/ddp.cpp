// DistributedDataParallel: the reducer. Marks count down each bucket's pending parameters; a
// bucket whose count reaches zero starts its all-reduce (avg) as soon as every bucket before it
// has started, so all ranks issue the same collectives in the same order whatever order their
// backward marks parameters in. finish() waits for the buckets and unpacks compressed ones.
// For ShardedDataParallel (Reduction::reduce_scatter) a bucket's launch is a reduce-scatter of
// its chunks plus an all-reduce of its tail (kolo/sharded_ddp.hpp); everything else is shared.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "ddp/compression.hpp"
#include "ddp/ddp_impl.hpp"
#include "ddp/layout_check.hpp"
#include "kolo/error.hpp"
#include "kolo/sharded_ddp.hpp"

namespace kolo {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void refuse(const std::string& why) {
  throw InvalidArgument("kolo: DistributedDataParallel: " + why);
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool ranges_overlap(const float* a, const float* b, size_t n) { return n > 0 && a < b + n && b < a + n; }

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<ProcessGroup> group, float* params, float* grads,
                                                 size_t total, std::vector<DdpParam> layout, DdpOptions opts)
    : DistributedDataParallel(std::move(group), params, grads, total, std::move(layout), opts, Reduction::allreduce) {}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<ProcessGroup> group, float* params, float* grads,
                                                 size_t total, std::vector<DdpParam> layout, DdpOptions opts,
                                                 Reduction reduction)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (!group) refuse("the process group is null");
  if (total > 0 && (params == nullptr || grads == nullptr)) refuse("params or grads is null");
  if (ranges_overlap(params, grads, total)) refuse("params and grads overlap; they must be separate buffers");
  s.group = std::move(group);
  s.params = params;
  s.grads = grads;
  s.total = total;
  s.layout = std::move(layout);
  s.opts = opts;
  s.reduction = reduction;
  (void)ddp::wire_dtype(opts.compression);  // refuses an unknown value before any collective
  if (opts.device.is_cuda()) {
    // The hooks pack on the host and the shard helpers read grads there: neither has a device path.
    if (opts.compression != GradCompression::none)
      refuse(std::string("gradient compression (") + ddp::compression_name(opts.compression) +
             ") needs host buffers; the buffers are on " + device_name(opts.device));
    if (reduction == Reduction::reduce_scatter)
      refuse("ShardedDataParallel needs host buffers; the buffers are on " + device_name(opts.device));
  }

  // Collective: the same layout and options everywhere (a MismatchError on every rank otherwise), then a plan
  // that is a pure function of it, hence identical (or refused identically) on every rank.
  ddp::check_same_layout(*s.group, s.layout, total, opts, reduction == Reduction::reduce_scatter);
  s.plan = plan_ddp_buckets(s.layout, total, opts);

  s.bucket_of_param.assign(s.layout.size(), 0);
  for (size_t b = 0; b < s.plan.size(); ++b)
    for (size_t p : s.plan[b].params) s.bucket_of_param[p] = b;
  if (opts.compression != GradCompression::none) {
    s.scratch.resize(s.plan.size());
    for (size_t b = 0; b < s.plan.size(); ++b) s.scratch[b].resize(s.plan[b].count);
  }
  s.reset_step();

  // Every rank starts from rank 0's parameters.
  if (total > 0) {
    BroadcastOptions bo;
    bo.root = 0;
    bo.timeout = opts.timeout;
    bo.stream = opts.stream;
    WorkPtr w = s.group->broadcast(Buffer(params, total, DataType::float32, opts.device), bo);
    s.wait_bounded(*w);
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  if (impl_) impl_->abort_in_flight("DistributedDataParallel destroyed while bucket all-reduces were in flight");
}

void DistributedDataParallel::mark_grad_ready(size_t param_index) {
  Impl& s = *impl_;
  if (param_index >= s.layout.size())
    refuse("mark_grad_ready(" + std::to_string(param_index) + "): the layout has " +
           std::to_string(s.layout.size()) + " parameters");
  if (s.marked[param_index])
    refuse("parameter #" + std::to_string(param_index) + " '" + s.layout[param_index].name +
           "' was marked ready twice in one step (finish() ends a step)");
  s.mark(param_index);
}

void DistributedDataParallel::finish() {
  Impl& s = *impl_;
  if (s.no_sync_depth > 0) {  // gradient accumulation: nothing to send
    s.reset_step();
    s.last_stats = {};
    return;
  }
  // A launch that failed earlier in the step (its error went to mark_grad_ready's caller) must
  // not let this step pass for averaged; one failing now is reported after the waits below.
  std::exception_ptr error = s.launch_error;
  if (!error) {
    try {
      for (size_t i = 0; i < s.layout.size(); ++i)
        if (!s.marked[i]) s.mark(i);
      // Buckets whose parameters were marked inside a no_sync scope that ended mid-step were
      // never counted down: they start now, still in bucket order.
      while (s.next_launch < s.plan.size()) s.launch(s.next_launch++);
    } catch (...) {
      error = std::current_exception();
    }
  }

  StepStats stats;
  const size_t wire_size = dtype_size(ddp::wire_dtype(s.opts.compression));
  for (size_t b = 0; b < s.next_launch; ++b) {
    Impl::BucketRun& run = s.runs[b];
    if (run.work) {
      const auto blocked_from = Clock::now();
      for (const WorkPtr& w : {run.work, run.tail_work}) {
        try {
          if (w) s.wait_bounded(*w);
        } catch (...) {
          if (!error) error = std::current_exception();
        }
      }
      stats.exposed_wait_seconds += seconds_between(blocked_from, Clock::now());
      if (!error && s.opts.compression != GradCompression::none) s.unpack(b);
    }
    if (run.done && run.done->set)
      stats.comm_seconds += seconds_between(run.started, Clock::time_point(Clock::duration(run.done->at.load())));
    stats.buckets += 1;
    stats.bytes += s.plan[b].count * wire_size;
  }
  s.reset_step();
  s.last_stats = stats;
  if (error) std::rethrow_exception(error);
}

DistributedDataParallel::StepStats DistributedDataParallel::last_step_stats() const { return impl_->last_stats; }
size_t DistributedDataParallel::bucket_count() const { return impl_->plan.size(); }
const std::vector<DdpBucket>& DistributedDataParallel::buckets() const { return impl_->plan; }
size_t DistributedDataParallel::launched_buckets() const { return impl_->next_launch; }
ProcessGroup& DistributedDataParallel::group() const { return *impl_->group; }

size_t DistributedDataParallel::completed_buckets() const {
  size_t n = 0;
  for (size_t b = 0; b < impl_->next_launch; ++b) {
    const WorkPtr& w = impl_->runs[b].tail_work ? impl_->runs[b].tail_work : impl_->runs[b].work;  // the last issued
    if (!w || w->is_completed()) ++n;
  }
  return n;
}

void DistributedDataParallel::Impl::mark(size_t index) {
  marked[index] = 1;
  ++marks_this_step;
  if (no_sync_depth > 0) return;
  --pending[bucket_of_param[index]];
  launch_ready_buckets();
}

void DistributedDataParallel::Impl::launch_ready_buckets() {
  while (next_launch < plan.size() && pending[next_launch] == 0) launch(next_launch++);
}

void DistributedDataParallel::Impl::launch(size_t b) {
  const DdpBucket& bucket = plan[b];
  BucketRun& run = runs[b];
  run.started = Clock::now();
  run.done = std::make_shared<Completion>();
  if (bucket.count == 0) {  // only empty parameters: the same on every rank, nothing to send
    run.done->record();
    return;
  }
  AllreduceOptions o;
  o.op = ReduceKind::avg;
  o.timeout = opts.timeout;
  o.overlap = true;  // start on the engine thread now: backward goes on meanwhile
  o.stream = opts.stream;
  Buffer data(grads + bucket.offset, bucket.count, DataType::float32, opts.device);
  if (opts.compression != GradCompression::none) {
    ddp::pack(opts.compression, grads + bucket.offset, scratch[b].data(), bucket.count);
    data = Buffer(scratch[b].data(), bucket.count, ddp::wire_dtype(opts.compression));
  }
  try {
    if (reduction == Reduction::allreduce)
      run.work = group->allreduce(data, o);
    else
      issue_reduce_scatter(b, data, o, run);
  } catch (...) {
    launch_error = std::current_exception();
    throw;
  }
  // The group runs operations in issue order, so the last one issued completes last.
  std::shared_ptr<Completion> done = run.done;
  (run.tail_work ? run.tail_work : run.work)->on_complete([done](Work&) { done->record(); });
}

// The bucket's chunks are reduce-scattered in place (rank r's average lands on chunk r); its tail
// of fewer than P elements is all-reduced, so any P works without padding the caller's buffers.
void DistributedDataParallel::Impl::issue_reduce_scatter(size_t b, const Buffer& data, const AllreduceOptions& o,
                                                         BucketRun& run) {
  const int ranks = group->size();
  const BucketSplit split = split_bucket(plan[b].count, ranks);
  const size_t element = dtype_size(data.dtype);
  char* base = static_cast<char*>(data.ptr);
  const size_t chunked = split.chunk * static_cast<size_t>(ranks);
  if (split.chunk > 0) {
    ReduceScatterOptions rs;
    rs.op = o.op;
    rs.timeout = o.timeout;
    rs.overlap = o.overlap;
    run.work = group->reduce_scatter(Buffer(base, chunked, data.dtype),
                                     Buffer(base + static_cast<size_t>(group->rank()) * split.chunk * element,
                                            split.chunk, data.dtype),
                                     rs);
  }
  if (split.tail > 0)
    (run.work ? run.tail_work : run.work) = group->allreduce(Buffer(base + chunked * element, split.tail, data.dtype), o);
}

// A compressed bucket back to float32: all of it after an all-reduce, only this rank's chunk and
// the tail after a reduce-scatter (the other chunks hold partial sums nobody reads).
void DistributedDataParallel::Impl::unpack(size_t b) {
  const DdpBucket& bucket = plan[b];
  auto copy_back = [&](size_t from, size_t count) {
    ddp::unpack(opts.compression, scratch[b].data() + from, grads + bucket.offset + from, count);
  };
  if (reduction == Reduction::allreduce) return copy_back(0, bucket.count);
  const BucketSplit split = split_bucket(bucket.count, group->size());
  copy_back(static_cast<size_t>(group->rank()) * split.chunk, split.chunk);
  copy_back(split.chunk * static_cast<size_t>(group->size()), split.tail);
}

// The operation itself fails at its own deadline (opts.timeout, else the group's), so wait() is
// bounded; with an explicit timeout we add a bound of our own in case a whole queue of buckets
// runs late, and abort the group if it passes so no collective writes into grads afterwards.
void DistributedDataParallel::Impl::wait_bounded(Work& work) const {
  if (opts.timeout.count() <= 0) {
    work.wait();
    return;
  }
  const auto bound = opts.timeout * static_cast<long>(plan.size() + 2);
  try {
    work.wait(bound);
  } catch (const TimeoutError&) {
    if (!work.is_completed()) group->abort("kolo: DistributedDataParallel: " + work.op_name() + " #" +
                                           std::to_string(work.seq()) + " did not finish in time");
    throw;
  }
}

void DistributedDataParallel::Impl::reset_step() {
  marked.assign(layout.size(), 0);
  pending.resize(plan.size());
  for (size_t b = 0; b < plan.size(); ++b) pending[b] = plan[b].params.size();
  runs.assign(plan.size(), BucketRun{});
  next_launch = 0;
  marks_this_step = 0;
  launch_error = nullptr;
}

// The buffers may be freed right after the destructor: anything still running must end first.
// Peers that issued the same buckets complete them quickly; if they do not within a short
// grace, the group is aborted (which fails the operations at once) rather than left writing.
void DistributedDataParallel::Impl::abort_in_flight(const char* reason) noexcept {
  constexpr std::chrono::milliseconds kGrace{2000};
  const auto give_up = Clock::now() + kGrace;
  bool aborted = false;
  for (size_t i = 0; i < 2 * next_launch && i / 2 < runs.size(); ++i) {
    const WorkPtr& w = i % 2 == 0 ? runs[i / 2].work : runs[i / 2].tail_work;  // a bucket's works in issue order
    if (!w) continue;
    try {
      // A device operation's wait() only queues a stream wait: the host must block here.
      const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()),
                                 std::chrono::milliseconds(1));
      if (w->on_device())
        w->synchronize(left);
      else
        w->wait(left);
    } catch (...) {
    }
    if (!w->is_completed() && !aborted) {
      std::fprintf(stderr, "kolo: %s; aborting the group\n", reason);
      try {
        group->abort(std::string("kolo: ") + reason);
      } catch (...) {
      }
      aborted = true;
    }
    if (aborted) {
      try {
        if (w->on_device())
          w->synchronize(std::chrono::milliseconds(10000));
        else
          w->wait(std::chrono::milliseconds(10000));
      } catch (...) {
      }
    }
  }
}

}  // namespace kolo

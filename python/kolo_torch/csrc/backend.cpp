// Each torch operation becomes one or a few kolo operations on contiguous buffers. Inputs are
// made contiguous (or flattened) at issue time; results that land in a staging buffer are copied
// into the user's tensors by the Work's finish step, before the Work and its future complete.
// CUDA tensors (built with KOLO_TORCH_CUDA): the buffers are device buffers, the operation is
// ordered on torch's current stream of their device (on_stream), staging tensors are kept in
// the Work (its `keep`) until their last use on the GPU is queued (work.hpp).
#include "backend.hpp"

#include <numeric>

#include <c10/util/Exception.h>

#include "errors.hpp"
#include "monitored_barrier.hpp"
#include "shared_world.hpp"
#include "sparse.hpp"
#include "store_adapter.hpp"
#include "tensors.hpp"
#include "work.hpp"

namespace kolo_torch {
namespace {

using c10d::OpType;

// c10d's "unset" (-1) and 0 both mean the group's timeout, which kolo spells 0.
kolo::Milliseconds op_timeout(std::chrono::milliseconds t) { return t.count() > 0 ? t : kolo::Milliseconds(0); }

kolo::ReduceOp reduce_op(const c10d::ReduceOp& op, const char* name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return kolo::ReduceKind::sum;
    case c10d::ReduceOp::AVG: return kolo::ReduceKind::avg;
    case c10d::ReduceOp::PRODUCT: return kolo::ReduceKind::prod;
    case c10d::ReduceOp::MIN: return kolo::ReduceKind::min;
    case c10d::ReduceOp::MAX: return kolo::ReduceKind::max;
    case c10d::ReduceOp::BAND: return kolo::ReduceKind::band;
    case c10d::ReduceOp::BOR: return kolo::ReduceKind::bor;
    case c10d::ReduceOp::BXOR: return kolo::ReduceKind::bxor;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(s != nullptr, "kolo: ", name, ": PREMUL_SUM without its factor");
#if TORCH_VERSION_MAJOR >= 2
      // torch 2.x holds one factor tensor (undefined when the factor is a double).
      const at::Tensor* f = s->tensor_factor.defined() ? &s->tensor_factor : nullptr;
#else
      // torch 1.13 holds a list of factor tensors (empty when the factor is a double).
      const at::Tensor* f = s->tensor_factors.empty() ? nullptr : &s->tensor_factors[0];
#endif
      if (f != nullptr) {
        TORCH_CHECK(f->numel() == 1, "kolo: ", name, ": PREMUL_SUM takes a one-element factor tensor");
        return kolo::ReduceOp::premul_sum(f->to(at::kCPU).item<double>());
      }
      return kolo::ReduceOp::premul_sum(s->double_factor);
    }
    default: TORCH_CHECK(false, "kolo: ", name, ": unsupported reduce op ", static_cast<int>(op.op_));
  }
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "kolo: ", op, " takes one tensor per process (got ", ts.size(), ")");
  return ts[0];
}

void check_root(int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "kolo: ", op, ": root rank ", root, " is outside the group of ", size);
}

// Counts in the units of move_buffer(t): elements for a kolo dtype, bytes otherwise.
size_t units(const at::Tensor& like, int64_t elements) {
  return static_cast<size_t>(elements) * (kolo_dtype(like.scalar_type()) ? 1 : like.element_size());
}

std::vector<size_t> displs_of(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

}  // namespace

ProcessGroupKolo::ProcessGroupKolo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, int world_rank)
    : BackendBase(rank, size) {
  timeout_ = timeout;
  auto base = adapt_store(store);
  base->set_timeout(timeout);
  // A subgroup (made while a default group exists) runs on the world's connections when
  // KOLO_SPLIT_SHARE says so (shared_world.hpp).
  if (world_rank >= 0) {
    if (auto shared = share_world(*base, rank, size, world_rank, timeout)) {
      pg_ = shared->pg;
      p2p_ = shared->p2p;
      return;
    }
  }
  // A subgroup made once the world shrank or grew is named after the world's generation: kolo
  // numbers the groups made under one name in each process, and a replacement that joined
  // (kolo_torch.join) did not make the subgroups the members made before it came; under the
  // generation's name every rank of the new world counts from 0.
  const int generation = world_rank >= 0 ? world_generation() : 0;
  const std::string suffix = generation > 0 ? ".gen" + std::to_string(generation) : std::string();
  kolo::GroupOptions o;
  o.timeout = timeout;
  o.name = "torch" + suffix;
  pg_ = kolo::ProcessGroup::create(kolo::make_prefix_store("coll", base), rank, size, o);
  o.name = "torch-p2p" + suffix;
  p2p_ = kolo::ProcessGroup::create(kolo::make_prefix_store("p2p", base), rank, size, o);
  if (world_rank < 0) remember_world(KoloGroups{pg_, p2p_});
}

ProcessGroupKolo::~ProcessGroupKolo() = default;

WorkRef ProcessGroupKolo::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const auto& t = single(tensors, "broadcast");
  const OpDevice dev = op_device({t}, "broadcast");
  check_root(opts.rootRank, size_, "broadcast");
  if (t.numel() == 0) return KoloWork::start(rank_, OpType::BROADCAST, {}, tensors, {}, {}, dev);
  Staged s = stage(t);
  kolo::BroadcastOptions o;
  o.root = static_cast<int>(opts.rootRank);
  o.timeout = op_timeout(opts.timeout);
  on_stream(o, dev);
  auto w = pg_->broadcast(move_buffer(s.flat), o);
  return KoloWork::start(rank_, OpType::BROADCAST, {w}, tensors, s.finish(), {s.flat}, dev);
}

WorkRef ProcessGroupKolo::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const auto& t = single(tensors, "all_reduce");
  if (t.is_sparse()) return allreduce_sparse(tensors, opts);
  const OpDevice dev = op_device({t}, "all_reduce");
  kolo::AllreduceOptions o;
  o.op = reduce_op(opts.reduceOp, "all_reduce");
  o.timeout = op_timeout(opts.timeout);
  if (t.numel() == 0) return KoloWork::start(rank_, OpType::ALLREDUCE, {}, tensors, {}, {}, dev);
  Staged s = stage(t);
  on_stream(o, dev);
  auto w = pg_->allreduce(reduce_buffer(s.flat, "all_reduce"), o);
  return KoloWork::start(rank_, OpType::ALLREDUCE, {w}, tensors, s.finish(), {s.flat}, dev);
}

WorkRef ProcessGroupKolo::allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const auto& t = single(tensors, "all_reduce");
  TORCH_CHECK(t.layout() == at::kSparse && t.device().is_cpu(),
              "kolo: all_reduce of a sparse tensor takes a sparse COO tensor on the CPU");
  TORCH_CHECK(opts.reduceOp.op_ == c10d::ReduceOp::SUM, "kolo: all_reduce of a sparse tensor: only SUM (as gloo)");
  at::Tensor sum = sparse_allreduce(*pg_, t, op_timeout(opts.timeout));
  tensors[0].copy_(sum);  // as gloo: the user's tensor becomes the sum (future's value too)
  return KoloWork::start(rank_, OpType::ALLREDUCE, {}, tensors);
}

WorkRef ProcessGroupKolo::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "kolo: all_reduce_coalesced takes at least one tensor");
  const OpDevice dev = op_device({tensors}, "all_reduce_coalesced");
  for (const auto& t : tensors)
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "kolo: all_reduce_coalesced takes tensors of one dtype (got ", tensors[0].scalar_type(), " and ",
                t.scalar_type(), ")");
  kolo::AllreduceOptions o;
  o.op = reduce_op(opts.reduceOp, "all_reduce_coalesced");
  o.timeout = op_timeout(opts.timeout);
  at::Tensor flat = flatten(tensors);
  if (flat.numel() == 0) return KoloWork::start(rank_, OpType::ALLREDUCE_COALESCED, {}, tensors, {}, {}, dev);
  on_stream(o, dev);
  auto w = pg_->allreduce(reduce_buffer(flat, "all_reduce_coalesced"), o);
  auto ts = tensors;
  return KoloWork::start(rank_, OpType::ALLREDUCE_COALESCED, {w}, tensors, [flat, ts] { unflatten(flat, ts); },
                         {flat}, dev);
}

WorkRef ProcessGroupKolo::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const auto& t = single(tensors, "reduce");
  const OpDevice dev = op_device({t}, "reduce");
  check_root(opts.rootRank, size_, "reduce");
  kolo::ReduceOptions o;
  o.op = reduce_op(opts.reduceOp, "reduce");
  o.root = static_cast<int>(opts.rootRank);
  o.timeout = op_timeout(opts.timeout);
  if (t.numel() == 0) return KoloWork::start(rank_, OpType::REDUCE, {}, tensors, {}, {}, dev);
  Staged s = stage(t);
  const bool root = rank_ == o.root;
  kolo::Buffer buf = reduce_buffer(s.flat, "reduce");
  on_stream(o, dev);
  auto w = pg_->reduce(buf, root ? buf : no_buffer(buf), o);
  return KoloWork::start(rank_, OpType::REDUCE, {w}, tensors, root ? s.finish() : std::function<void()>(),
                         {s.flat}, dev);
}

WorkRef ProcessGroupKolo::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions& opts) {
  const auto& in = single(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1, "kolo: all_gather takes one output list per process");
  auto outs = outputs[0];
  TORCH_CHECK(static_cast<int>(outs.size()) == size_, "kolo: all_gather needs ", size_, " output tensors (got ",
              outs.size(), ")");
  const OpDevice dev = op_device({in, outs}, "all_gather");
  check_same(outs, in, "all_gather", "output tensors");
  const int64_t n = in.numel();
  if (n == 0) return KoloWork::start(rank_, OpType::ALLGATHER, {}, outs, {}, {}, dev);
  at::Tensor src = in.contiguous();
  at::Tensor flat = at::empty({n * size_}, in.options());
  kolo::AllgatherOptions o;
  o.timeout = op_timeout(opts.timeout);
  on_stream(o, dev);
  auto w = pg_->allgather(move_buffer(src), move_buffer(flat), o);
  return KoloWork::start(rank_, OpType::ALLGATHER, {w}, outs, [flat, outs, n] {
    for (size_t i = 0; i < outs.size(); ++i)
      outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
  }, {src, flat}, dev);
}

WorkRef ProcessGroupKolo::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const OpDevice dev = op_device({input, output}, "all_gather_into_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "kolo: all_gather_into_tensor: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_, "kolo: all_gather_into_tensor: output has ", output.numel(),
              " elements, expected ", input.numel() * size_, " (input elements x group size)");
  if (input.numel() == 0) return KoloWork::start(rank_, OpType::_ALLGATHER_BASE, {}, {output}, {}, {}, dev);
  at::Tensor src = input.contiguous();
  Staged s = stage(output);
  kolo::AllgatherOptions o;
  o.timeout = op_timeout(opts.timeout);
  on_stream(o, dev);
  auto w = pg_->allgather(move_buffer(src), move_buffer(s.flat), o);
  return KoloWork::start(rank_, OpType::_ALLGATHER_BASE, {w}, {output}, s.finish(), {src, s.flat}, dev);
}

WorkRef ProcessGroupKolo::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                              std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "kolo: all_gather_coalesced takes at least one input tensor");
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "kolo: all_gather_coalesced needs ", size_,
              " output lists (got ", outputs.size(), ")");
  std::vector<at::Tensor> all;
  for (const auto& list : outputs) all.insert(all.end(), list.begin(), list.end());
  const OpDevice dev = op_device({inputs, all}, "all_gather_coalesced");
  for (const auto& t : inputs)
    TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "kolo: all_gather_coalesced takes tensors of one dtype");
  for (const auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "kolo: all_gather_coalesced: every output list needs ", inputs.size(),
                " tensors");
    for (size_t i = 0; i < list.size(); ++i) check_same({list[i]}, inputs[i], "all_gather_coalesced", "output tensors");
  }
  at::Tensor src = flatten(inputs);
  const int64_t n = src.numel();
  if (n == 0) return KoloWork::start(rank_, OpType::ALLGATHER_COALESCED, {}, all, {}, {}, dev);
  at::Tensor flat = at::empty({n * size_}, src.options());
  kolo::AllgatherOptions o;
  o.timeout = op_timeout(opts.timeout);
  on_stream(o, dev);
  auto w = pg_->allgather(move_buffer(src), move_buffer(flat), o);
  auto outs = outputs;
  return KoloWork::start(rank_, OpType::ALLGATHER_COALESCED, {w}, all, [flat, outs, n] {
    for (size_t r = 0; r < outs.size(); ++r) unflatten(flat.narrow(0, static_cast<int64_t>(r) * n, n), outs[r]);
  }, {src, flat}, dev);
}

WorkRef ProcessGroupKolo::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::GatherOptions& opts) {
  const auto& in = single(inputs, "gather");
  check_root(opts.rootRank, size_, "gather");
  const bool root = rank_ == opts.rootRank;
  std::vector<at::Tensor> outs;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "kolo: gather needs ", size_,
                " output tensors on the root");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "kolo: gather takes output tensors on the root only");
  }
  const OpDevice dev = op_device({in, outs}, "gather");
  if (root) check_same(outs, in, "gather", "output tensors");
  const int64_t n = in.numel();
  if (n == 0) return KoloWork::start(rank_, OpType::GATHER, {}, outs, {}, {}, dev);
  at::Tensor src = in.contiguous();
  at::Tensor flat = root ? at::empty({n * size_}, in.options()) : at::Tensor();
  kolo::GatherOptions o;
  o.root = static_cast<int>(opts.rootRank);
  o.timeout = op_timeout(opts.timeout);
  on_stream(o, dev);
  auto w = pg_->gather(move_buffer(src), root ? move_buffer(flat) : no_buffer(move_buffer(src)), o);
  std::function<void()> finish;
  if (root)
    finish = [flat, outs, n] {
      for (size_t i = 0; i < outs.size(); ++i)
        outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
    };
  return KoloWork::start(rank_, OpType::GATHER, {w}, outs, finish, {src, flat}, dev);
}

WorkRef ProcessGroupKolo::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ScatterOptions& opts) {
  const auto& out = single(outputs, "scatter");
  check_root(opts.rootRank, size_, "scatter");
  const bool root = rank_ == opts.rootRank;
  at::Tensor flat;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "kolo: scatter needs ", size_,
                " input tensors on the root");
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "kolo: scatter takes input tensors on the root only");
  }
  const OpDevice dev = op_device({out, root ? c10::ArrayRef<at::Tensor>(inputs[0]) : c10::ArrayRef<at::Tensor>()},
                                 "scatter");
  if (root) {
    check_same(inputs[0], out, "scatter", "input tensors");
    flat = flatten(inputs[0]);
  }
  if (out.numel() == 0) return KoloWork::start(rank_, OpType::SCATTER, {}, outputs, {}, {}, dev);
  Staged s = stage(out);
  kolo::ScatterOptions o;
  o.root = static_cast<int>(opts.rootRank);
  o.timeout = op_timeout(opts.timeout);
  on_stream(o, dev);
  auto w = pg_->scatter(root ? move_buffer(flat) : no_buffer(move_buffer(s.flat)), move_buffer(s.flat), o);
  return KoloWork::start(rank_, OpType::SCATTER, {w}, outputs, s.finish(), {flat, s.flat}, dev);
}

WorkRef ProcessGroupKolo::reduce_scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  const auto& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "kolo: reduce_scatter needs ",
              size_, " input tensors");
  const OpDevice dev = op_device({out, inputs[0]}, "reduce_scatter");
  check_same(inputs[0], out, "reduce_scatter", "input tensors");
  kolo::ReduceScatterOptions o;
  o.op = reduce_op(opts.reduceOp, "reduce_scatter");
  o.timeout = op_timeout(opts.timeout);
  if (out.numel() == 0) return KoloWork::start(rank_, OpType::REDUCE_SCATTER, {}, outputs, {}, {}, dev);
  at::Tensor flat = flatten(inputs[0]);
  Staged s = stage(out);
  on_stream(o, dev);
  auto w = pg_->reduce_scatter(reduce_buffer(flat, "reduce_scatter"), reduce_buffer(s.flat, "reduce_scatter"), o);
  return KoloWork::start(rank_, OpType::REDUCE_SCATTER, {w}, outputs, s.finish(), {flat, s.flat}, dev);
}

WorkRef ProcessGroupKolo::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::ReduceScatterOptions& opts) {
  const OpDevice dev = op_device({input, output}, "reduce_scatter_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "kolo: reduce_scatter_tensor: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_, "kolo: reduce_scatter_tensor: input has ", input.numel(),
              " elements, expected ", output.numel() * size_, " (output elements x group size)");
  kolo::ReduceScatterOptions o;
  o.op = reduce_op(opts.reduceOp, "reduce_scatter_tensor");
  o.timeout = op_timeout(opts.timeout);
  if (output.numel() == 0) return KoloWork::start(rank_, OpType::_REDUCE_SCATTER_BASE, {}, {output}, {}, {}, dev);
  at::Tensor src = input.contiguous();
  Staged s = stage(output);
  on_stream(o, dev);
  auto w = pg_->reduce_scatter(reduce_buffer(src, "reduce_scatter_tensor"),
                               reduce_buffer(s.flat, "reduce_scatter_tensor"), o);
  return KoloWork::start(rank_, OpType::_REDUCE_SCATTER_BASE, {w}, {output}, s.finish(), {src, s.flat}, dev);
}

WorkRef ProcessGroupKolo::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                        std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const OpDevice dev = op_device({input, output}, "all_to_all_single");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "kolo: all_to_all_single: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  kolo::AllToAllOptions o;
  o.timeout = op_timeout(opts.timeout);
  at::Tensor src = input.contiguous();
  Staged s = stage(output);
  // Split sizes count rows (dim 0); no splits means equal blocks.
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) {
    std::vector<size_t> c(static_cast<size_t>(size_));
    if (splits.empty()) {
      TORCH_CHECK(t.numel() % size_ == 0, "kolo: all_to_all_single: ", what, " has ", t.numel(),
                  " elements, not a multiple of the group size ", size_);
      for (auto& x : c) x = units(t, t.numel() / size_);
      return c;
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == size_, "kolo: all_to_all_single: ", what, " split sizes need ",
                size_, " entries (got ", splits.size(), ")");
    const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
    TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows, "kolo: all_to_all_single: ",
                what, " split sizes do not add up to its ", rows, " rows");
    const int64_t row = rows > 0 ? t.numel() / rows : 0;
    for (size_t i = 0; i < c.size(); ++i) c[i] = units(t, splits[i] * row);
    return c;
  };
  auto sc = counts(src, input_splits, "input");
  auto rc = counts(s.flat, output_splits, "output");
  if (input.numel() == 0 && output.numel() == 0 && input_splits.empty() && output_splits.empty())
    return KoloWork::start(rank_, OpType::ALLTOALL_BASE, {}, {output}, {}, {}, dev);
  on_stream(o, dev);
  kolo::WorkPtr w;
  if (input_splits.empty() && output_splits.empty())
    w = pg_->alltoall(move_buffer(src), move_buffer(s.flat), o);
  else
    w = pg_->alltoallv(move_buffer(src), sc, displs_of(sc), move_buffer(s.flat), rc, displs_of(rc), o);
  return KoloWork::start(rank_, OpType::ALLTOALL_BASE, {w}, {output}, s.finish(), {src, s.flat}, dev);
}

WorkRef ProcessGroupKolo::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "kolo: all_to_all needs ", size_, " input and output tensors");
  const OpDevice dev = op_device({inputs, outputs}, "all_to_all");
  for (const auto& t : inputs)
    TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "kolo: all_to_all takes tensors of one dtype");
  for (const auto& t : outputs)
    TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "kolo: all_to_all: output dtype ", t.scalar_type(),
                " differs from input dtype ", inputs[0].scalar_type());
  at::Tensor src = flatten(inputs);
  std::vector<size_t> sc, rc;
  int64_t total = 0;
  for (const auto& t : inputs) sc.push_back(units(src, t.numel()));
  for (const auto& t : outputs) {
    rc.push_back(units(src, t.numel()));
    total += t.numel();
  }
  at::Tensor flat = at::empty({total}, src.options());
  kolo::AllToAllOptions o;
  o.timeout = op_timeout(opts.timeout);
  on_stream(o, dev);
  auto w = pg_->alltoallv(move_buffer(src), sc, displs_of(sc), move_buffer(flat), rc, displs_of(rc), o);
  auto outs = outputs;
  return KoloWork::start(rank_, OpType::ALLTOALL, {w}, outputs, [flat, outs] { unflatten(flat, outs); },
                         {src, flat}, dev);
}

WorkRef ProcessGroupKolo::barrier(const c10d::BarrierOptions& opts) {
  kolo::BarrierOptions o;
  o.timeout = op_timeout(opts.timeout);
  return KoloWork::start(rank_, OpType::BARRIER, {pg_->barrier(o)}, {});
}

void ProcessGroupKolo::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  // On the point-to-point group: rank 0 hears from every rank by itself, so it can tell who
  // did not arrive (a collective barrier only knows that it timed out).
  monitored_barrier(*p2p_, barrier_tensors_, opts.timeout.count() > 0 ? opts.timeout : timeout_, wait_all_ranks);
}

WorkRef ProcessGroupKolo::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const auto& t = single(tensors, "send");
  const OpDevice dev = op_device({t}, "send");
  TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_, "kolo: send: bad destination rank ", dst);
  if (t.numel() == 0) return KoloWork::start(rank_, OpType::SEND, {}, tensors, {}, {}, dev);
  at::Tensor src = t.contiguous();
  kolo::SendOptions o;
  o.tag = static_cast<uint32_t>(tag);
  on_stream(o, dev);
  auto w = lane(rank_, dst).send(move_buffer(src), dst, o);
  return KoloWork::start(rank_, OpType::SEND, {w}, tensors, {}, {src}, dev);
}

WorkRef ProcessGroupKolo::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const auto& t = single(tensors, "recv");
  const OpDevice dev = op_device({t}, "recv");
  TORCH_CHECK(src >= 0 && src < size_ && src != rank_, "kolo: recv: bad source rank ", src);
  if (t.numel() == 0) {
    auto work = KoloWork::start(rank_, OpType::RECV, {}, tensors, {}, {}, dev);
    work->set_source(src);
    return work;
  }
  Staged s = stage(t);
  kolo::RecvOptions o;
  o.tag = static_cast<uint32_t>(tag);
  on_stream(o, dev);
  auto w = lane(src, rank_).recv(move_buffer(s.flat), src, o);
  auto work = KoloWork::start(rank_, OpType::RECV, {w}, tensors, s.finish(), {s.flat}, dev);
  work->set_source(src);
  return work;
}

WorkRef ProcessGroupKolo::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  // kolo's receive from any source (kolo::kAnySource): it looks at every pair's next message
  // without taking it and receives the first with this tag; the Work says who sent it.
  const auto& t = single(tensors, "recv");
  const OpDevice dev = op_device({t}, "recv");
  // An empty tensor is sent as no message at all (see send), so there is nothing to take.
  TORCH_CHECK(t.numel() > 0, "kolo: recv from any source of an empty tensor: nothing is sent for an empty tensor; "
                             "name the source rank");
  Staged s = stage(t);
  kolo::RecvOptions o;
  o.tag = static_cast<uint32_t>(tag);
  on_stream(o, dev);
  auto w = p2p_->recv(move_buffer(s.flat), kolo::kAnySource, o);
  return KoloWork::start(rank_, OpType::RECVANYSOURCE, {w}, tensors, s.finish(), {s.flat}, dev);
}

#if TORCH_VERSION_MAJOR >= 2
// torch 2.x's coalescing manager for all_gather_into_tensor / reduce_scatter_tensor lists: one
// operation per pair, joined into one Work.
WorkRef ProcessGroupKolo::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "kolo: all_gather_into_tensor_coalesced: ", inputs.size(),
              " inputs but ", outputs.size(), " outputs");
  std::vector<c10::intrusive_ptr<KoloWork>> works;
  for (size_t i = 0; i < inputs.size(); ++i)
    works.push_back(c10::static_intrusive_pointer_cast<KoloWork>(_allgather_base(outputs[i], inputs[i], opts)));
  return KoloWork::join(rank_, OpType::_ALLGATHER_BASE, works, outputs);
}

WorkRef ProcessGroupKolo::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "kolo: reduce_scatter_tensor_coalesced: ", inputs.size(),
              " inputs but ", outputs.size(), " outputs");
  std::vector<c10::intrusive_ptr<KoloWork>> works;
  for (size_t i = 0; i < inputs.size(); ++i)
    works.push_back(c10::static_intrusive_pointer_cast<KoloWork>(_reduce_scatter_base(outputs[i], inputs[i], opts)));
  return KoloWork::join(rank_, OpType::_REDUCE_SCATTER_BASE, works, outputs);
}
#endif

}  // namespace kolo_torch

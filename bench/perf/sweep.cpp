#include "sweep.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "check.hpp"
#include "collectives.hpp"
#include "issue.hpp"
#include "placement.hpp"
#include "timing.hpp"
#include "values.hpp"

namespace kolo::perf {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<void, FreeDeleter>;

AlignedBytes allocate(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Touch every page now, as the peers' benchmarks do (peer_sweep.cpp), not inside a timed run:
  // without checks nothing writes the buffers, and an in-place run that reads a region no
  // earlier run wrote (a scatter root's other blocks) read unpopulated memory, at 16 MiB 4x
  // slower than populated (process_vm_readv faulting the root's pages in on every call).
  std::memset(p, 0, rounded);
  return AlignedBytes(p);
}

// One printed row: a collective, type, operator and size.
struct RowSetup {
  const CollectiveSpec& spec;
  DataType dtype;
  ReduceOp op;
  Shape shape;
  size_t row_bytes;  // the "size" column: max(send, recv) bytes
  void* send_base;
  void* recv_base;
};

int64_t sum_across_ranks(ProcessGroup& group, int64_t value) {
  Buffer buf(&value, 1);
  group.allreduce(buf)->wait();
  return value;
}

class Sweep {
 public:
  Sweep(ProcessGroup& group, const PerfOptions& o, bench::Reporter& report) : group_(group), o_(o), report_(report) {}

  void run() {
    const CollectiveSpec& spec = find_collective(o_.collective);
    // -u shifts the buffers by up to unalign elements of the widest type (8 bytes).
    const size_t slack = static_cast<size_t>(o_.unalign) * 8;
    send_ = allocate(o_.max_bytes + slack);
    recv_ = allocate(o_.max_bytes + slack);
    // Data movement takes no operator: one pass, printed as "none".
    const std::vector<ReduceOp> ops = spec.reduces ? o_.ops : std::vector<ReduceOp>{ReduceOp()};
    for (DataType dtype : o_.dtypes) {
      for (const ReduceOp& op : ops) {
        if (spec.reduces && op.is_bitwise() && is_floating(dtype)) {
          if (o_.all_ops || o_.all_dtypes) continue;
          throw UsageError(std::string("-o ") + nccl_op_name(op.kind) + " is bitwise and needs an integer -d, not " +
                           nccl_dtype_name(dtype));
        }
        // -N: the whole sweep again, run_cycles times (0: until killed), as nccl-tests repeats it.
        for (int cycle = 0; o_.run_cycles == 0 || cycle < o_.run_cycles; ++cycle) {
          for (size_t size = o_.min_bytes;;) {
            run_row(spec, dtype, op, size);
            if (!bench::next_size(size, o_.max_bytes, o_.step_bytes, o_.step_factor)) break;
          }
        }
      }
    }
  }

 private:
  void run_row(const CollectiveSpec& spec, DataType dtype, const ReduceOp& op, size_t size) {
    const int n = group_.size();
    const size_t elem = dtype_size(dtype);
    const Shape shape = spec.shape(size / elem, n);
    const size_t row_bytes = std::max(shape.send_count, shape.recv_count) * elem;
    const size_t shift = static_cast<size_t>(o_.unalign) * elem;
    const RowSetup row{spec, dtype, op, shape, row_bytes, static_cast<char*>(send_.get()) + shift,
                       static_cast<char*>(recv_.get()) + shift};
    report_.begin_row(spec.name, row_bytes, shape.param_count, nccl_dtype_name(dtype),
                      spec.reduces ? nccl_op_name(op.kind) : "none", spec.rooted ? o_.root : -1);
    try {
      measure_both(row);
    } catch (...) {
      report_.end_row();  // finish the half-printed row before the error text
      throw;
    }
    report_.end_row();
  }

  // Out-of-place then in-place: time, check, print one column group each.
  void measure_both(const RowSetup& row) {
    const CollectiveSpec& spec = row.spec;
    for (bool in_place : {false, true}) {
      const Placement where =
          place(spec, row.shape, row.dtype, group_.rank(), o_.root, in_place, row.send_base, row.recv_base);
      const RunParams params{row.op, o_.root, o_.algorithm};
      const PreparedCall call(group_, spec, where, row.shape.param_count, params);
      if (!in_place) run_and_wait(call, o_.warmup_iters);
      std::vector<double> iteration_seconds;
      double seconds = time_iterations(group_, call, o_.iters, o_.agg_iters, o_.blocking_mode,
                                       o_.per_iter_timing ? &iteration_seconds : nullptr);
      seconds = combine_across_ranks(group_, seconds, o_.combine);
      const bool checked = o_.check && checkable(spec, in_place);
      int64_t wrong = -1;
      // -c N: up to N check runs with fresh values, stopping at the first that finds a wrong element.
      for (int c = 0; checked && c < o_.check_iters && wrong <= 0; ++c) wrong = check_once(row, where, call, in_place);
      const double algbw = seconds > 0 ? static_cast<double>(row.row_bytes) / 1.0e9 / seconds : 0.0;
      const double busbw = algbw * spec.busbw_factor(group_.size());
      if (o_.per_iter_timing) {
        const bench::PerIteration per_iter = gather_iterations(iteration_seconds);
        report_.measurement(in_place, seconds * 1.0e6, algbw, busbw, wrong, &per_iter);
      } else {
        report_.measurement(in_place, seconds * 1.0e6, algbw, busbw, wrong);
      }
    }
  }

  // -I 1: every rank's iteration times (allgather), and per iteration the slowest rank's.
  bench::PerIteration gather_iterations(const std::vector<double>& mine_seconds) {
    const size_t iters = mine_seconds.size();
    const size_t n = static_cast<size_t>(group_.size());
    std::vector<double> mine(mine_seconds);
    for (double& t : mine) t *= 1.0e6;
    std::vector<double> all(iters * n);
    group_.allgather(Buffer(mine.data(), iters, DataType::float64), Buffer(all.data(), all.size(), DataType::float64))
        ->wait();
    bench::PerIteration p;
    p.times_us.assign(iters, 0.0);
    for (size_t r = 0; r < n; ++r) {
      p.per_process_us.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * iters),
                                    all.begin() + static_cast<std::ptrdiff_t>((r + 1) * iters));
      for (size_t i = 0; i < iters; ++i) p.times_us[i] = std::max(p.times_us[i], p.per_process_us[r][i]);
    }
    return p;
  }

  // Refills the inputs with fresh values, runs once more and counts wrong elements everywhere.
  int64_t check_once(const RowSetup& row, const Placement& where, const PreparedCall& call, bool in_place) {
    ++salt_;  // every rank counts the same way, so all agree on the values
    const ValuePlan plan(row.dtype, row.spec.reduces ? &row.op : nullptr, group_.size(), salt_);
    const CheckContext context{&row.spec, row.shape, group_.rank(), group_.size(), o_.root, in_place};
    fill_inputs(context, where, plan);
    run_and_wait(call, 1);
    if (o_.inject_wrong) spoil_first_output(context, where);
    return sum_across_ranks(group_, count_wrong(context, where, plan));
  }

  ProcessGroup& group_;
  const PerfOptions& o_;
  AlignedBytes send_;
  AlignedBytes recv_;
  bench::Reporter& report_;
  uint64_t salt_ = 0;
};

}  // namespace

void run_sweep(ProcessGroup& group, const PerfOptions& o, bench::Reporter& report) { Sweep(group, o, report).run(); }

}  // namespace kolo::perf

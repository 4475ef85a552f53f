#include "sweep.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>

#include "check.hpp"
#include "collectives.hpp"
#include "issue.hpp"
#include "placement.hpp"
#include "report.hpp"
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
  return AlignedBytes(p);
}

// The size after `size`, as nccl-tests steps (but never stuck at 0 and never overflowing).
bool next_size(const PerfOptions& o, size_t& size) {
  size_t next;
  if (o.step_factor > 1) {
    if (size > std::numeric_limits<size_t>::max() / o.step_factor) return false;
    next = std::max<size_t>(size * o.step_factor, 1);
  } else {
    if (size > std::numeric_limits<size_t>::max() - o.step_bytes) return false;
    next = size + o.step_bytes;
  }
  size = next;
  return size <= o.max_bytes;
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
  Sweep(ProcessGroup& group, const PerfOptions& o) : group_(group), o_(o) {}

  SweepTotals run() {
    const CollectiveSpec& spec = find_collective(o_.collective);
    send_ = allocate(o_.max_bytes);
    recv_ = allocate(o_.max_bytes);
    // Data movement takes no operator: one pass, printed as "none".
    const std::vector<ReduceOp> ops = spec.reduces ? o_.ops : std::vector<ReduceOp>{ReduceOp()};
    for (DataType dtype : o_.dtypes) {
      for (const ReduceOp& op : ops) {
        if (spec.reduces && op.is_bitwise() && is_floating(dtype)) {
          if (o_.all_ops || o_.all_dtypes) continue;
          throw UsageError(std::string("-o ") + nccl_op_name(op.kind) + " is bitwise and needs an integer -d, not " +
                           nccl_dtype_name(dtype));
        }
        for (size_t size = o_.min_bytes;;) {
          run_row(spec, dtype, op, size);
          if (!next_size(o_, size)) break;
        }
      }
    }
    return totals_;
  }

 private:
  void run_row(const CollectiveSpec& spec, DataType dtype, const ReduceOp& op, size_t size) {
    const int n = group_.size();
    const size_t elem = dtype_size(dtype);
    const Shape shape = spec.shape(size / elem, n);
    const size_t row_bytes = std::max(shape.send_count, shape.recv_count) * elem;
    const RowSetup row{spec, dtype, op, shape, row_bytes, send_.get(), recv_.get()};
    const bool printing = group_.rank() == 0;
    if (printing)
      print_row_start(row_bytes, shape.param_count, nccl_dtype_name(dtype), spec.reduces ? nccl_op_name(op.kind) : "none",
                      spec.rooted ? o_.root : -1);
    try {
      measure_both(row, printing);
    } catch (...) {
      if (printing) print_row_end();  // finish the half-printed row before the error text
      throw;
    }
    if (printing) print_row_end();
  }

  // Out-of-place then in-place: time, check, print one column group each.
  void measure_both(const RowSetup& row, bool printing) {
    const CollectiveSpec& spec = row.spec;
    for (bool in_place : {false, true}) {
      const Placement where =
          place(spec, row.shape, row.dtype, group_.rank(), o_.root, in_place, row.send_base, row.recv_base);
      const RunParams params{row.op, o_.root, o_.algorithm};
      const IssueOnce issue_once = [&] { return issue(group_, spec, where, row.shape.param_count, params); };
      if (!in_place) run_and_wait(issue_once, o_.warmup_iters);
      double seconds = time_iterations(group_, issue_once, o_.iters, o_.blocking);
      seconds = combine_across_ranks(group_, seconds, o_.combine);
      const bool checked = o_.check && checkable(spec, in_place);
      const int64_t wrong = checked ? check_once(row, where, issue_once, in_place) : -1;
      const double algbw = seconds > 0 ? static_cast<double>(row.row_bytes) / 1.0e9 / seconds : 0.0;
      const double busbw = algbw * spec.busbw_factor(group_.size());
      if (printing) print_measurement(seconds * 1.0e6, algbw, busbw, wrong);
      totals_.busbw_sum += busbw;
      totals_.busbw_count++;
      if (wrong > 0) totals_.wrong += wrong;
    }
  }

  // Refills the inputs with fresh values, runs once more and counts wrong elements everywhere.
  int64_t check_once(const RowSetup& row, const Placement& where, const IssueOnce& issue_once, bool in_place) {
    ++salt_;  // every rank counts the same way, so all agree on the values
    const ValuePlan plan(row.dtype, row.spec.reduces ? &row.op : nullptr, group_.size(), salt_);
    const CheckContext context{&row.spec, row.shape, group_.rank(), group_.size(), o_.root, in_place};
    fill_inputs(context, where, plan);
    run_and_wait(issue_once, 1);
    return sum_across_ranks(group_, count_wrong(context, where, plan));
  }

  ProcessGroup& group_;
  const PerfOptions& o_;
  AlignedBytes send_;
  AlignedBytes recv_;
  uint64_t salt_ = 0;
  SweepTotals totals_;
};

}  // namespace

SweepTotals run_sweep(ProcessGroup& group, const PerfOptions& o) { return Sweep(group, o).run(); }

}  // namespace kolo::perf

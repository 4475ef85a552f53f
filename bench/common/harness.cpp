#include "harness.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>

#include "check.hpp"
#include "device_memory.hpp"
#include "report.hpp"
#include "sizes.hpp"
#include "timing_loop.hpp"
#include "usage_error.hpp"
#include "values.hpp"

namespace kolo::bench {

Placement nccl_placement(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int rank, int root,
                         bool in_place, void* send_base, void* recv_base) {
  auto* recv_bytes = static_cast<unsigned char*>(recv_base);
  const size_t own_block = static_cast<size_t>(rank) * shape.param_count * element_bytes;
  Placement p{in_place ? recv_base : send_base, shape.send_count, recv_base, shape.recv_count};
  switch (spec.id) {
    case CollId::broadcast: {
      void* buffer = (!in_place && rank == root) ? send_base : recv_base;
      p = Placement{buffer, shape.param_count, buffer, shape.param_count};
      break;
    }
    case CollId::allgather:
    case CollId::gather:  // in place: this rank's block already sits in the result
      if (in_place) p.send = recv_bytes + own_block;
      break;
    case CollId::reducescatter:
    case CollId::scatter:  // in place: this rank's result is its block of the input
      if (in_place) p.recv = recv_bytes + own_block;
      break;
    default:
      break;
  }
  return p;
}

namespace {

class BlockingRun final : public PreparedRun {
 public:
  explicit BlockingRun(RunOnce run_once) : run_once_(std::move(run_once)) {}
  void run_and_wait(int count) override {
    for (int i = 0; i < count; ++i) run_once_();
  }
  // -m and -z are not applied (the peers' notes say so) and -I is off: `iters` blocking calls.
  double time(const TimingRequest& t, std::vector<double>*) override {
    return time_each_waited(std::ref(run_once_), t.iters);
  }

 private:
  RunOnce run_once_;
};

}  // namespace

std::unique_ptr<PreparedRun> blocking_run(RunOnce run_once) {
  return std::make_unique<BlockingRun>(std::move(run_once));
}

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
  // Touch every page now, not inside a timed run: without checks nothing writes the buffers, and
  // an in-place run that reads a region no earlier run wrote (a scatter root's other blocks) read
  // unpopulated memory, at 16 MiB 4x slower than populated (kolo's process_vm_readv faulting the
  // root's pages in on every call).
  std::memset(p, 0, rounded);
  return AlignedBytes(p);
}

// Every rank's pid, host and (-g 1) GPU, for the "Using devices" lines: one record per rank,
// its fields separated by tabs (no host or GPU name has one).
std::vector<RankDescription> describe_ranks(Backend& backend, const DeviceInfo* device) {
  constexpr size_t kRecord = 256;
  std::vector<char> mine(kRecord, '\0');
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  std::snprintf(mine.data(), kRecord, "%d\t%s\t%d\t%s\t%s\t%s", static_cast<int>(getpid()), host,
                device ? device->index : -1, device ? device->pci.c_str() : "", device ? device->bus_id.c_str() : "",
                device ? device->name.c_str() : "");
  const std::vector<char> all = backend.allgather_bytes(mine);
  std::vector<RankDescription> ranks;
  for (int r = 0; r < backend.size(); ++r) {
    const char* record = all.data() + kRecord * static_cast<size_t>(r);
    const std::string text(record, strnlen(record, kRecord));
    std::vector<std::string> f;
    for (size_t start = 0;;) {
      const size_t tab = text.find('\t', start);
      f.push_back(text.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    f.resize(6);
    RankDescription d;
    d.rank = r;
    d.pid = std::atoi(f[0].c_str());
    d.host = f[1].empty() ? "?" : f[1];
    d.device = f[2].empty() ? -1 : std::atoi(f[2].c_str());
    d.device_pci = f[3];
    d.device_bus_id = f[4];
    d.device_name = f[5];
    ranks.push_back(d);
  }
  return ranks;
}

// One printed row: a collective, type, operator and size.
struct RowSetup {
  const CollectiveSpec& spec;
  ElementType type;
  RedOp op;
  Shape shape;
  size_t row_bytes;  // the "size" column: max(send, recv) bytes
  void* send_base;
  void* recv_base;
};

class Sweep {
 public:
  Sweep(Backend& backend, const SweepOptions& o, const std::string& program, Reporter& report, DeviceMemory* device)
      : backend_(backend), o_(o), program_(program), report_(report), device_(device) {}
  ~Sweep() {
    if (device_ == nullptr) return;
    device_->release(device_send_);
    device_->release(device_recv_);
  }

  void run() {
    const CollectiveSpec& spec = find_collective(o_.collective);
    // -u shifts the buffers by up to unalign elements of the widest type (8 bytes).
    const size_t slack = o_.unaligns ? static_cast<size_t>(o_.unalign) * 8 : 0;
    capacity_ = o_.max_bytes + slack;
    send_ = allocate(capacity_);
    recv_ = allocate(capacity_);
    if (device_ != nullptr) {
      // -g 1: the collectives run on these; send_ and recv_ stay as the host images that the
      // values are written to and checked in, copied over before and back after each check run.
      device_send_ = device_->allocate(capacity_);
      device_recv_ = device_->allocate(capacity_);
    }
    // Data movement takes no operator: one pass, printed as "none".
    const std::vector<RedOp> ops = spec.reduces ? o_.ops : std::vector<RedOp>{RedOp::sum};
    const int cycles = o_.repeats_cycles ? o_.run_cycles : 1;
    for (ElementType type : o_.dtypes) {
      for (RedOp op : ops) {
        if (spec.reduces && is_bitwise(op) && is_floating(type)) {
          if (o_.all_ops || o_.all_dtypes) continue;
          throw UsageError(std::string("-o ") + redop_name(op) + " is bitwise and needs an integer -d, not " +
                           element_name(type));
        }
        // -N: the whole sweep again, run_cycles times (0: until killed), as nccl-tests repeats it.
        for (int cycle = 0; cycles == 0 || cycle < cycles; ++cycle) {
          for (size_t size = o_.min_bytes;;) {
            run_row(spec, type, op, size);
            if (!next_size(size, o_.max_bytes, o_.step_bytes, o_.step_factor)) break;
          }
        }
      }
    }
  }

 private:
  void run_row(const CollectiveSpec& spec, ElementType type, RedOp op, size_t size) {
    const size_t elem = element_size(type);
    const Shape shape = spec.shape(size / elem, backend_.size());
    const size_t row_bytes = std::max(shape.send_count, shape.recv_count) * elem;
    const size_t shift = o_.unaligns ? static_cast<size_t>(o_.unalign) * elem : 0;
    const RowSetup row{spec, type, op, shape, row_bytes, static_cast<char*>(send_.get()) + shift,
                       static_cast<char*>(recv_.get()) + shift};
    device_extent_ = shift + row_bytes;  // what the row's placements can touch in each buffer
    report_.begin_row(spec.name, row_bytes, shape.param_count, element_name(type),
                      spec.reduces ? redop_name(op) : "none", spec.rooted ? o_.root : -1);
    try {
      for (bool in_place : {false, true}) measure(row, in_place);
    } catch (...) {
      report_.end_row();  // finish the half-printed row before the error text
      throw;
    }
    report_.end_row();
  }

  // One column group: warm up (out-of-place only, once per size), time, check, print.
  void measure(const RowSetup& row, bool in_place) {
    const CollectiveSpec& spec = row.spec;
    const Placement where = backend_.place(spec, row.shape, element_size(row.type), o_.root, in_place, row.send_base,
                                           row.recv_base);
    const CheckContext context{&spec, row.shape, row.type, backend_.rank(), backend_.size(), o_.root, in_place};
    // -g 1: the same placement over the device buffers (the host images' offsets).
    const Placement run_where = device_ == nullptr ? where : on_device(where);
    const std::unique_ptr<PreparedRun> run =
        backend_.prepare({&spec, row.type, row.op, o_.root, row.shape, in_place, run_where});
    if (o_.fill_before_timing) {
      fill_for_timing(context, where);
      copy_to_device();
    }
    if (!in_place) run->run_and_wait(o_.warmup_iters);
    std::vector<double> iteration_seconds;
    backend_.barrier();
    double seconds = run->time({o_.iters, o_.agg_iters, o_.blocking_mode},
                               o_.per_iter_timing ? &iteration_seconds : nullptr);
    seconds = combine(seconds);
    const bool checked = o_.check && backend_.checkable(spec, in_place);
    int64_t wrong = -1;
    // -c N: up to N check runs with fresh values, stopping at the first that finds a wrong element.
    for (int c = 0; checked && c < o_.check_iters && wrong <= 0; ++c) wrong = check_once(context, where, *run, row.op);
    const double algbw = seconds > 0 ? static_cast<double>(row.row_bytes) / 1.0e9 / seconds : 0.0;
    const double busbw = algbw * spec.busbw_factor(backend_.size());
    if (o_.per_iter_timing) {
      const PerIteration per_iter = gather_iterations(iteration_seconds);
      report_.measurement(in_place, seconds * 1.0e6, algbw, busbw, wrong, &per_iter);
    } else {
      report_.measurement(in_place, seconds * 1.0e6, algbw, busbw, wrong);
    }
  }

  // Every rank's seconds combined as -a asks: rank 0's, the average, the minimum or the maximum.
  double combine(double seconds) {
    switch (o_.combine) {
      case TimeCombine::rank0:
        return backend_.reduce_double(backend_.rank() == 0 ? seconds : 0.0, Combine::sum);
      case TimeCombine::average:
        return backend_.reduce_double(seconds, Combine::sum) / backend_.size();
      case TimeCombine::minimum:
        return backend_.reduce_double(seconds, Combine::min);
      case TimeCombine::maximum:
        return backend_.reduce_double(seconds, Combine::max);
    }
    return seconds;
  }

  // -I 1: every rank's iteration times, and per iteration the slowest rank's.
  PerIteration gather_iterations(const std::vector<double>& mine_seconds) {
    const size_t iters = mine_seconds.size();
    const size_t n = static_cast<size_t>(backend_.size());
    std::vector<char> mine(iters * sizeof(double));
    for (size_t i = 0; i < iters; ++i) {
      const double us = mine_seconds[i] * 1.0e6;
      std::memcpy(mine.data() + i * sizeof(double), &us, sizeof(double));
    }
    const std::vector<char> all = backend_.allgather_bytes(mine);
    PerIteration p;
    p.times_us.assign(iters, 0.0);
    for (size_t r = 0; r < n; ++r) {
      std::vector<double> times(iters);
      if (iters > 0) std::memcpy(times.data(), all.data() + r * iters * sizeof(double), iters * sizeof(double));
      for (size_t i = 0; i < iters; ++i) p.times_us[i] = std::max(p.times_us[i], times[i]);
      p.per_process_us.push_back(std::move(times));
    }
    return p;
  }

  // Refills the inputs with fresh values, runs once more and counts wrong elements everywhere.
  int64_t check_once(const CheckContext& context, const Placement& where, PreparedRun& run, RedOp op) {
    ++salt_;  // every rank counts the same way, so all agree on the values
    const ValuePlan plan(context.type, context.spec->reduces ? &op : nullptr, backend_.size(), salt_);
    fill_inputs(context, where, plan);
    copy_to_device();
    run.run_and_wait(1);  // device memory: returns with the result in place (KoloBackend)
    copy_to_host();
    if (o_.inject_wrong) spoil_first_output(context, where);
    const double local_wrong = static_cast<double>(count_wrong(context, where, plan, program_.c_str()));
    return static_cast<int64_t>(backend_.reduce_double(local_wrong, Combine::sum));
  }

  // The host placement moved onto the device buffers: each pointer at its offset in its base.
  Placement on_device(const Placement& host) const {
    const auto move = [this](void* p) -> void* {
      if (p == nullptr) return nullptr;
      auto* c = static_cast<char*>(p);
      auto* send = static_cast<char*>(send_.get());
      const bool in_send = c >= send && c <= send + capacity_;
      return static_cast<char*>(in_send ? device_send_ : device_recv_) +
             (c - static_cast<char*>(in_send ? send_.get() : recv_.get()));
    };
    return Placement{move(host.send), host.send_count, move(host.recv), host.recv_count};
  }
  // Whole buffers up to the row's extent: simpler than tracking which placement reads what, and
  // never timed.
  void copy_to_device() {
    if (device_ == nullptr) return;
    device_->to_device(device_send_, send_.get(), device_extent_);
    device_->to_device(device_recv_, recv_.get(), device_extent_);
  }
  void copy_to_host() {
    if (device_ == nullptr) return;
    device_->to_host(send_.get(), device_send_, device_extent_);
    device_->to_host(recv_.get(), device_recv_, device_extent_);
  }

  Backend& backend_;
  const SweepOptions& o_;
  const std::string& program_;
  Reporter& report_;
  DeviceMemory* device_;  // -g 1, else nullptr (host memory)
  size_t capacity_ = 0;  // bytes in each buffer
  AlignedBytes send_;
  AlignedBytes recv_;
  void* device_send_ = nullptr;
  void* device_recv_ = nullptr;
  size_t device_extent_ = 0;
  uint64_t salt_ = 0;
};

}  // namespace

int run_benchmark(Backend& backend, const SweepOptions& o, const std::string& program, const std::string& device_tag,
                  DeviceMemory* device) {
  if (o.root >= backend.size())
    throw UsageError("-r " + std::to_string(o.root) + " is not a rank of this " + std::to_string(backend.size()) +
                     "-rank job");
  const auto ranks = describe_ranks(backend, device != nullptr ? &device->info() : nullptr);
  Reporter report(backend.rank() == 0, {program, backend.library(), backend.size()}, o);
  report.preamble(ranks, device_tag);
  Sweep(backend, o, program, report, device).run();
  return report.finish();
}

}  // namespace kolo::bench

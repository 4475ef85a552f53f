#include "peer_sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "peer_check.hpp"
#include "report.hpp"

namespace kolo::peers {
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
  std::memset(p, 0, rounded);  // touch every page now, not inside the first timed run
  return AlignedBytes(p);
}

using bench::RankDescription;

std::vector<RankDescription> describe_ranks(PeerBackend& backend) {
  constexpr size_t kRecord = 64;
  std::vector<char> mine(kRecord, '\0');
  char host[kRecord - 16] = {};
  gethostname(host, sizeof host - 1);
  std::snprintf(mine.data(), kRecord, "%d %s", static_cast<int>(getpid()), host);
  const std::vector<char> all = backend.allgather_bytes(mine);
  std::vector<RankDescription> ranks;
  for (int r = 0; r < backend.size(); ++r) {
    const char* record = all.data() + kRecord * static_cast<size_t>(r);
    const std::string text(record, strnlen(record, kRecord));
    const size_t space = text.find(' ');
    ranks.push_back({r, std::atoi(text.c_str()), space == std::string::npos ? "?" : text.substr(space + 1)});
  }
  return ranks;
}

class Sweep {
 public:
  Sweep(PeerBackend& backend, const PeerOptions& o, const char* program, bench::Reporter& report)
      : backend_(backend), o_(o), program_(program), report_(report) {}

  void run() {
    const CollectiveSpec& spec = find_collective(o_.collective);
    send_ = allocate(o_.max_bytes);
    recv_ = allocate(o_.max_bytes);
    // Data movement takes no operator: one pass, printed as "none".
    const std::vector<ReduceKind> ops = spec.reduces ? o_.ops : std::vector<ReduceKind>{ReduceKind::sum};
    for (ElementType type : o_.types) {
      for (ReduceKind op : ops) {
        for (size_t size = o_.min_bytes;;) {
          run_row(spec, type, op, size);
          if (!bench::next_size(size, o_.max_bytes, o_.step_bytes, o_.step_factor)) break;
        }
      }
    }
  }

 private:
  void run_row(const CollectiveSpec& spec, ElementType type, ReduceKind op, size_t size) {
    const size_t elem = element_size(type);
    const Shape shape = spec.shape(size / elem, backend_.size());
    const size_t row_bytes = std::max(shape.send_count, shape.recv_count) * elem;
    report_.begin_row(spec.name, row_bytes, shape.param_count, type_name(type), spec.reduces ? op_name(op) : "none",
                      spec.rooted ? o_.root : -1);
    try {
      for (bool in_place : {false, true}) measure(spec, type, op, shape, row_bytes, in_place);
    } catch (...) {
      report_.end_row();  // finish the half-printed row before the error text
      throw;
    }
    report_.end_row();
  }

  void measure(const CollectiveSpec& spec, ElementType type, ReduceKind op, const Shape& shape, size_t row_bytes,
               bool in_place) {
    const size_t elem = element_size(type);
    const Placement where = backend_.place(spec, shape, elem, o_.root, in_place, send_.get(), recv_.get());
    const CheckContext context{&spec, shape, type, backend_.rank(), backend_.size(), o_.root, in_place};
    const RunOnce run_once = backend_.prepare({&spec, type, op, o_.root, shape, in_place, where});
    fill_for_timing(context, where);
    // Like kolo-perf: warm up once per size, before the out-of-place column.
    if (!in_place)
      for (int i = 0; i < o_.warmup_iters; ++i) run_once();
    backend_.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) run_once();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double seconds = combine(elapsed.count() / o_.iters);

    int64_t wrong = -1;
    if (o_.check) {
      ++salt_;  // every rank counts alike, so all agree on the values
      const ValuePlan plan(type, spec.reduces ? &op : nullptr, backend_.size(), salt_);
      fill_inputs(context, where, plan);
      run_once();
      const double local_wrong = static_cast<double>(count_wrong(context, where, plan, program_));
      wrong = static_cast<int64_t>(backend_.reduce_double(local_wrong, Combine::sum));
    }
    const double algbw = seconds > 0 ? static_cast<double>(row_bytes) / 1.0e9 / seconds : 0.0;
    const double busbw = algbw * spec.busbw_factor(backend_.size());
    report_.measurement(in_place, seconds * 1.0e6, algbw, busbw, wrong);
  }

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

  PeerBackend& backend_;
  const PeerOptions& o_;
  const char* program_;
  bench::Reporter& report_;
  AlignedBytes send_;
  AlignedBytes recv_;
  uint64_t salt_ = 0;
};

}  // namespace

int run_benchmark(PeerBackend& backend, const PeerOptions& o, const char* program) {
  if (o.root >= backend.size())
    throw UsageError("-r " + std::to_string(o.root) + " is not a rank of this " + std::to_string(backend.size()) +
                     "-rank job");
  const auto ranks = describe_ranks(backend);
  bench::Reporter report(backend.rank() == 0, {program, backend.library(), backend.size()}, o);
  report.preamble(ranks, std::string("[") + program + "]");
  Sweep sweep(backend, o, program, report);
  sweep.run();
  return report.finish();
}

}  // namespace kolo::peers

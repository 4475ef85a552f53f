// What a library must provide for the benchmark harness (harness.hpp), which kolo-perf
// (bench/perf/kolo_backend.cpp) and the peers (bench/peers/mpi_backend.cpp, gloo_backend.cpp)
// share: its rank and size, a barrier, a small reduction and gather for the harness's own
// bookkeeping, where a run's data sits, and one prepared run of a collective, which the harness
// warms up, times and checks.
//
// The harness calls through this interface only outside the timed loop (once per measured column).
// The timed loop itself is PreparedRun::time, which each backend implements with the templates of
// timing_loop.hpp over its own call type, so that the per-call path (issue + wait) is the
// library's call and nothing else: no virtual call, no allocation per operation.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collective_specs.hpp"
#include "common_options.hpp"
#include "elements.hpp"

namespace kolo::bench {

// Where one rank's data lives for one run.
struct Placement {
  void* send = nullptr;  // what the collective reads (broadcast: the root's buffer)
  size_t send_count = 0;
  void* recv = nullptr;  // what it writes (broadcast: the same buffer)
  size_t recv_count = 0;
};

// nccl-tests' layout: out-of-place reads send_base and writes recv_base; in place both live in
// recv_base, (all)gather's input at this rank's block of the result and reducescatter's and
// scatter's result at this rank's block of the input. Both bases hold max(send, recv) elements.
Placement nccl_placement(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int rank, int root,
                         bool in_place, void* send_base, void* recv_base);

// One run of one collective: everything a backend needs to set it up.
struct RunRequest {
  const CollectiveSpec* spec;
  ElementType type;
  RedOp op;   // reductions only (premul_sum: with kPremulFactor, values.hpp)
  int root;   // rooted collectives only
  Shape shape;
  bool in_place;
  Placement where;
};

// The timed loop's parameters (nccl-tests' -n, -m, -z).
struct TimingRequest {
  int iters;
  int agg_iters;
  Blocking mode;
};

// A run set up once per measured column (outside the timing).
class PreparedRun {
 public:
  virtual ~PreparedRun() = default;
  // Runs it `count` times, each waited for: the warm-up and the check runs.
  virtual void run_and_wait(int count) = 0;
  // The timed loop, entered right after the harness's barrier: seconds per operation measured on
  // this rank. iteration_seconds (-I 1, when the program honours it): each iteration's time too.
  virtual double time(const TimingRequest& t, std::vector<double>* iteration_seconds) = 0;
};

// Runs a prepared collective once and returns when this rank's part is complete.
using RunOnce = std::function<void()>;

// The peers' run (kolo-perf-mpi, kolo-perf-gloo): every operation is a blocking library call,
// issued and waited for on its own, so -z and -m change nothing (their notes say so) and time()
// runs time_each_waited over `iters` calls of `run_once`, as the peers always have: a
// std::function call per operation, the clock read only around the whole loop.
std::unique_ptr<PreparedRun> blocking_run(RunOnce run_once);

enum class Combine { sum, min, max };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The library and how it runs, for the preamble and every JSON/CSV row ("Open MPI v4.1.4 ...").
  virtual std::string library() const = 0;
  virtual void barrier() = 0;
  // Every rank gets the sum / minimum / maximum of `value` over all ranks.
  virtual double reduce_double(double value, Combine how) = 0;
  // Every rank's `mine` (the same length on every rank), concatenated in rank order.
  virtual std::vector<char> allgather_bytes(const std::vector<char>& mine) = 0;
  // Where the data of a run sits. The default is nccl-tests' layout; a library whose in-place
  // convention differs (MPI's reduce-scatter) overrides it.
  virtual Placement place(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int root,
                          bool in_place, void* send_base, void* recv_base) const {
    return nccl_placement(spec, shape, element_bytes, rank(), root, in_place, send_base, recv_base);
  }
  // Whether the check mode can verify this run (kolo: not in-place sendrecv, as nccl-tests).
  virtual bool checkable(const CollectiveSpec&, bool /*in_place*/) const { return true; }
  // Sets up a run (outside the timing: Gloo builds its algorithm object here).
  virtual std::unique_ptr<PreparedRun> prepare(const RunRequest& request) = 0;
};

}  // namespace kolo::bench

#include "timing.hpp"

#include <chrono>

namespace kolo::perf {

void run_and_wait(const PreparedCall& call, int count) {
  for (int i = 0; i < count; ++i) call.run_and_wait();
}

double time_iterations(ProcessGroup& group, const PreparedCall& call, int iters, int agg_iters, Blocking mode,
                       std::vector<double>* iteration_seconds) {
  using Clock = std::chrono::steady_clock;
  group.barrier()->wait();
  std::vector<WorkPtr> pending;
  if (mode == Blocking::none) pending.reserve(static_cast<size_t>(iters) * static_cast<size_t>(agg_iters) * 2);
  std::chrono::duration<double> untimed_excluded{0};  // -z 3: the operations only, barriers left out
  const auto start = Clock::now();
  // A clock read costs tens of nanoseconds (33 ns on this project's VMs, as much as a tenth of a
  // small collective): only the modes that use the iteration's start read it, as Open MPI's
  // peer (bench/peers/peer_sweep.cpp) reads the clock only around the whole loop.
  const bool per_iteration_clock = iteration_seconds != nullptr || mode == Blocking::wait_barrier_untimed;
  if (mode == Blocking::wait && !per_iteration_clock) {
    // The default (-z 2, compare.sh's): each operation waited for and nothing else, in a loop as
    // plain as the peers' (for (i...) run_once()); the general loop below tests its modes on
    // every iteration (~20 instructions a call).
    const long total = static_cast<long>(iters) * agg_iters;
    for (long k = 0; k < total; ++k) call.run_and_wait();
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    return elapsed.count() / static_cast<double>(total);
  }
  for (int i = 0; i < iters; ++i) {
    const auto iteration_start = per_iteration_clock ? Clock::now() : Clock::time_point{};
    for (int a = 0; a < agg_iters; ++a) {
      if (mode == Blocking::none) {
        call.issue(&pending);
        continue;
      }
      // nccl-tests' startColl: -z 1, 2 and 3 wait for each operation, -z 1 adds a barrier.
      call.run_and_wait();
      if (mode == Blocking::wait_barrier) group.barrier()->wait();
    }
    if (iteration_seconds != nullptr) {
      for (const WorkPtr& w : pending) w->wait();
      pending.clear();
      const std::chrono::duration<double> took = Clock::now() - iteration_start;
      iteration_seconds->push_back(took.count() / agg_iters);
    }
    if (mode == Blocking::wait_barrier_untimed) {
      untimed_excluded += Clock::now() - iteration_start;
      group.barrier()->wait();
    }
  }
  // Operations complete in issue order, so waiting in that order adds no delay.
  for (const WorkPtr& w : pending) w->wait();
  const std::chrono::duration<double> elapsed = Clock::now() - start;
  const double seconds = mode == Blocking::wait_barrier_untimed ? untimed_excluded.count() : elapsed.count();
  return seconds / (static_cast<double>(iters) * agg_iters);
}

double combine_across_ranks(ProcessGroup& group, double seconds, TimeCombine how) {
  double value = seconds;
  Buffer buf(&value, 1);
  switch (how) {
    case TimeCombine::rank0: {
      BroadcastOptions o;
      o.root = 0;
      group.broadcast(buf, o)->wait();
      return value;
    }
    case TimeCombine::average: {
      AllreduceOptions o;
      o.op = ReduceKind::sum;
      group.allreduce(buf, o)->wait();
      return value / group.size();
    }
    case TimeCombine::minimum:
    case TimeCombine::maximum: {
      AllreduceOptions o;
      o.op = how == TimeCombine::minimum ? ReduceKind::min : ReduceKind::max;
      group.allreduce(buf, o)->wait();
      return value;
    }
  }
  return value;
}

}  // namespace kolo::perf

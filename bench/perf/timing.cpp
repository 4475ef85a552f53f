#include "timing.hpp"

#include <chrono>

namespace kolo::perf {

void run_and_wait(const IssueOnce& issue_once, int count) {
  for (int i = 0; i < count; ++i) {
    for (const WorkPtr& w : issue_once()) w->wait();
  }
}

double time_iterations(ProcessGroup& group, const IssueOnce& issue_once, int iters, bool blocking) {
  group.barrier()->wait();
  std::vector<WorkPtr> pending;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    std::vector<WorkPtr> works = issue_once();
    if (blocking) {
      for (const WorkPtr& w : works) w->wait();
    } else {
      pending.insert(pending.end(), works.begin(), works.end());
    }
  }
  // Operations complete in issue order, so waiting in that order adds no delay.
  for (const WorkPtr& w : pending) w->wait();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / iters;
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

// The timing loop: barrier, `iters` iterations of `agg_iters` operations each (-m), back to back
// or waited for as -z asks, and the per-rank time combined across ranks as -a asks.
#pragma once
#include <vector>

#include "issue.hpp"
#include "kolo/process_group.hpp"
#include "options.hpp"

namespace kolo::perf {

// Runs the call `count` times, waiting for each (for warm-up and check runs).
void run_and_wait(const PreparedCall& call, int count);

// Seconds per operation measured on this rank (elapsed / (iters x agg_iters); with -z 3 only the
// time up to each iteration's barrier counts, as in nccl-tests).
// iteration_seconds (-I 1): also the time of each iteration per operation, measured by waiting
// for each iteration before issuing the next (a CPU has no stream events to time them in flight).
double time_iterations(ProcessGroup& group, const PreparedCall& call, int iters, int agg_iters, Blocking mode,
                       std::vector<double>* iteration_seconds = nullptr);

// Combines every rank's seconds: rank 0's, the average, the minimum or the maximum.
// Collective: every rank calls it.
double combine_across_ranks(ProcessGroup& group, double seconds, TimeCombine how);

}  // namespace kolo::perf

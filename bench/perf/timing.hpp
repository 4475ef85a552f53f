// The timing loop: barrier, `iters` runs back to back (or each waited for with -z 1), and the
// per-rank time combined across ranks as -a asks.
#pragma once
#include <functional>
#include <vector>

#include "kolo/process_group.hpp"
#include "options.hpp"

namespace kolo::perf {

using IssueOnce = std::function<std::vector<WorkPtr>()>;

// Runs issue_once `count` times and waits for everything (for warm-up and check runs).
void run_and_wait(const IssueOnce& issue_once, int count);

// Seconds per iteration measured on this rank.
double time_iterations(ProcessGroup& group, const IssueOnce& issue_once, int iters, bool blocking);

// Combines every rank's seconds: rank 0's, the average, the minimum or the maximum.
// Collective: every rank calls it.
double combine_across_ranks(ProcessGroup& group, double seconds, TimeCombine how);

}  // namespace kolo::perf

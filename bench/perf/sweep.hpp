// The measurement sweep: every requested type x operator x size, out-of-place then in-place,
// each timed and (with -c 1) checked, one printed row per size on rank 0.
#pragma once
#include <cstdint>

#include "kolo/process_group.hpp"
#include "options.hpp"
#include "report.hpp"

namespace kolo::perf {

// Collective: every rank runs it with the same options; every measurement goes to `report`
// (which prints on rank 0 and keeps the totals). Throws UsageError for a combination that was
// asked for explicitly but cannot run (a bitwise operator on a floating type).
void run_sweep(ProcessGroup& group, const PerfOptions& o, bench::Reporter& report);

}  // namespace kolo::perf

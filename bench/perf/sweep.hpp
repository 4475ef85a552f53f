// The measurement sweep: every requested type x operator x size, out-of-place then in-place,
// each timed and (with -c 1) checked, one printed row per size on rank 0.
#pragma once
#include <cstdint>

#include "kolo/process_group.hpp"
#include "options.hpp"

namespace kolo::perf {

struct SweepTotals {
  int64_t wrong = 0;       // wrong elements over every row, all ranks
  double busbw_sum = 0;    // for the "Avg bus bandwidth" footer
  int busbw_count = 0;
};

// Collective: every rank runs it with the same options. Throws UsageError for a combination
// that was asked for explicitly but cannot run (a bitwise operator on a floating type).
SweepTotals run_sweep(ProcessGroup& group, const PerfOptions& o);

}  // namespace kolo::perf

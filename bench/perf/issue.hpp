// Starts one run of a collective on a group and returns its Work handles (sendrecv: two).
#pragma once
#include <string>
#include <vector>

#include "collectives.hpp"
#include "kolo/process_group.hpp"
#include "placement.hpp"

namespace kolo::perf {

struct RunParams {
  ReduceOp op;            // reductions only
  int root = 0;           // rooted collectives only
  std::string algorithm;  // Options.algorithm ("" = automatic)
};

// Issues the collective once and appends its Works (two for sendrecv) to `out`.
void issue(ProcessGroup& group, const CollectiveSpec& spec, const Placement& where, size_t param_count,
           const RunParams& params, std::vector<WorkPtr>* out);

// Whether the check mode can verify this run. Like nccl-tests, in-place sendrecv (one buffer
// both sent from and received into while both are in flight) is timed but not checked.
bool checkable(const CollectiveSpec& spec, bool in_place);

}  // namespace kolo::perf

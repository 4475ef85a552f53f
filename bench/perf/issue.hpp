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

std::vector<WorkPtr> issue(ProcessGroup& group, const CollectiveSpec& spec, const Placement& where,
                           size_t param_count, const RunParams& params);

// sendrecv sends to rank+1 and receives from rank-1. A group runs its operations one after
// another, so the order matters: odd ranks receive first, even ranks send first, which breaks
// the cycle of ranks that would all wait for a receiver. In place, an odd rank has therefore
// forwarded what it received; this says which rank's data `rank` sends.
int sendrecv_source_of_sent_data(int rank, bool in_place);

}  // namespace kolo::perf

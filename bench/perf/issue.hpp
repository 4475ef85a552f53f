// One collective call of a benchmark row, prepared once: its buffers and options are built
// before the timing starts, as the peer benchmarks prepare theirs (bench/peers: a lambda that
// calls MPI_Allreduce and nothing else), so that the timed loop runs the call and its wait and
// nothing of the harness. Building them per call cost the harness ~150 instructions per call
// (a std::function, a switch, options with a std::string, a vector of Works) where Open MPI's
// peer spends ~30: a fifth of a small two-rank collective (docs/PERFORMANCE.md).
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

class PreparedCall {
 public:
  PreparedCall(ProcessGroup& group, const CollectiveSpec& spec, const Placement& where, size_t param_count,
               const RunParams& params);
  // Issues the collective once and appends its Works (two for sendrecv) to `out` (-z 0: many
  // in flight).
  void issue(std::vector<WorkPtr>* out) const;
  // Issues it and waits for it: what the waiting modes (-z 1-3), the warm-up and the checks do.
  void run_and_wait() const;

 private:
  ProcessGroup& group_;
  CollId id_;
  Buffer send_, recv_;  // with each collective's counts set (param_count)
  int next_ = 0, prev_ = 0;  // sendrecv's peers
  AllreduceOptions allreduce_;
  BroadcastOptions broadcast_;
  ReduceOptions reduce_;
  AllgatherOptions allgather_;
  ReduceScatterOptions reduce_scatter_;
  AllToAllOptions alltoall_;
  GatherOptions gather_;
  ScatterOptions scatter_;
  SendOptions send_options_;
  RecvOptions recv_options_;
};

// Whether the check mode can verify this run. Like nccl-tests, in-place sendrecv (one buffer
// both sent from and received into while both are in flight) is timed but not checked.
bool checkable(const CollectiveSpec& spec, bool in_place);

}  // namespace kolo::perf

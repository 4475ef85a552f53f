// What every worker scenario gets: its rank (from the launch environment), the check log, and
// the group once it has joined one (kept here so that main() can abort it on an error).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "check_log.hpp"
#include "kolo/kolo.hpp"

namespace kolo::coltest {

struct WorkerContext {
  int rank = 0;
  int world = 1;
  std::vector<std::string> args;  // the scenario's own arguments
  CheckLog log{0};
  std::shared_ptr<ProcessGroup> group;

  // Joins the world group with kolo::init_from_env (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
  ProcessGroup& join(const GroupOptions& options = {});
  // Prints a line to stdout at once: the driver watches stdout for progress markers.
  void say(const std::string& line) const;
};

using Scenario = void (*)(WorkerContext&);

// The scenarios (one file each).
void scenario_matrix(WorkerContext& ctx);            // args: collective name
void scenario_inflight(WorkerContext& ctx);
void scenario_subgroups(WorkerContext& ctx);
void scenario_allreduce_loop(WorkerContext& ctx);    // args: [COUNT]; runs until an error (or 60 s)
void scenario_mismatch_collective(WorkerContext& ctx);
void scenario_mismatch_count(WorkerContext& ctx);
void scenario_join(WorkerContext& ctx);              // joins, one barrier, leaves
void scenario_bad_arguments(WorkerContext& ctx);
void scenario_work_api(WorkerContext& ctx);
void scenario_device(WorkerContext& ctx);           // KOLO_TEST_DEVICE_MEMORY=1: stream semantics, refusals, failures
void scenario_who_runs(WorkerContext& ctx);
void scenario_direct(WorkerContext& ctx);           // small collectives run by their issuer (KOLO_DIRECT)
void scenario_direct_order(WorkerContext& ctx);     // a send never passes queued sends (2 ranks)
void scenario_direct_forward(WorkerContext& ctx);   // a message longer than a slot is not held (4 ranks)
void scenario_fr_stall(WorkerContext& ctx);      // rank 1 stalls: the others time out and dump
void scenario_fr_sigusr1(WorkerContext& ctx);    // SIGUSR1 dumps a live job
void scenario_random(WorkerContext& ctx);
void scenario_sockets(WorkerContext& ctx);               // prints the sockets a ring and an all-to-all open
void scenario_any_source(WorkerContext& ctx);             // receives from any source (kAnySource)
void scenario_any_source_fails(WorkerContext& ctx);       // args: mismatch | timeout | dead
void scenario_split_share(WorkerContext& ctx);           // args: share|connect [CASES PER COLLECTIVE]
void scenario_split_share_misorder(WorkerContext& ctx);  // world rank 0 issues child and world in another order
void scenario_split_share_disagree(WorkerContext& ctx);  // rank 0 does not share, the others do
void scenario_split_share_kill(WorkerContext& ctx);      // child and world loop until the driver kills a rank
void scenario_shrink(WorkerContext& ctx);                 // args: kill|named|request|stop VICTIM [SEED [SELF_KILL_AT]]
void scenario_grow(WorkerContext& ctx);                   // args: member|shrink-grow VICTIM|joiner R N G|idle|late
void scenario_dead_before_connect(WorkerContext& ctx);   // the last rank exits right after joining           // args: SEED COUNT [MAX_BYTES [SAMPLE_EVERY [SUBGROUPS]]]

}  // namespace kolo::coltest

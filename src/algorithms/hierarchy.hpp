// What the hierarchical algorithms share: which ranks form this rank's host, which rank leads
// each host, and running one phase of a collective on a subset of ranks (SubComm).
//
// The shape (as NCCL's and Open MPI's han hierarchical collectives): the ranks of a host
// combine their data over the intra-host transport (shared memory), one leader per host runs
// the inter-host part over the network, and the leaders hand the result back inside their
// hosts. Only the leaders' messages cross hosts, so a host's network link carries one rank's
// share instead of every rank's, and the number of inter-host steps depends on the number of
// hosts, not of ranks.
#pragma once
#include <vector>

#include "algorithms/algorithm.hpp"

namespace kolo::algo {

struct HostPlan {
  std::vector<int> local;    // this rank's host: its ranks, ascending
  int my_local = 0;          // this rank's index in `local`
  int leader_local = 0;      // the leader's index in `local`
  std::vector<int> leaders;  // one rank per host, in host order
  int my_host = 0;           // this rank's host, an index into `leaders`
  bool is_leader() const { return my_local == leader_local; }
};

// Leaders are each host's lowest rank, except that the host holding `root` (when root >= 0)
// is led by the root, so a rooted collective's data starts or ends at a leader.
HostPlan plan_hosts(const Comm& comm, int root = -1);

// Runs `algo` with `args` on the ranks `ranks` (parent ranks; this rank is ranks[my_index]).
// `slot_base` separates the phase's scratch slots from the other phases'; `finalizes` says
// whether this phase's result is the collective's full reduction (see SubComm).
void run_phase(const Algorithm& algo, Comm& parent, const std::vector<int>& ranks, int my_index, const CollArgs& args,
               int slot_base, bool finalizes);

// A registered algorithm by kind and name (a missing one is a build mistake: logic_error).
const Algorithm& registered(CollKind kind, const char* name);

// Scratch slots of the phases: the hierarchical algorithm itself uses slots below kPhaseSlots.
constexpr int kPhaseSlots = 8;
inline int phase_slots(int phase) { return kPhaseSlots * (phase + 1); }

}  // namespace kolo::algo

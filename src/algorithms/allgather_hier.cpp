// Allgather "hier", for groups whose hosts hold equal, consecutive blocks of ranks
// (HostLayout::uniform_blocks): each host gathers its ranks' blocks at its leader (they are
// one contiguous region of recv), the leaders all-gather those regions across hosts, and each
// leader broadcasts the whole result inside its host.
#include "algorithms/hierarchy.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

bool supports(const CollArgs&, const HostLayout& hosts) { return hosts.uniform_blocks(); }

void run(Comm& comm) {
  // Selection never picks this for other layouts (supports); a direct call still gets a
  // correct result, from the flat ring.
  if (!comm.hosts().uniform_blocks()) return registered(CollKind::allgather, "ring").run(comm);
  const CollArgs& a = comm.args();
  const HostPlan p = plan_hosts(comm);
  const size_t per_host = p.local.size(), es = a.elem_size();
  char* host_region = byte_at(a.recv, static_cast<size_t>(p.my_host) * per_host * a.count, es);

  CollArgs in = a;  // 1. the host's blocks meet at the leader, in their place
  in.kind = CollKind::gather;
  in.root = p.leader_local;
  in.recv = host_region;
  run_phase(registered(CollKind::gather, "direct"), comm, p.local, p.my_local, in, phase_slots(0), false);

  if (p.is_leader()) {  // 2. host regions across hosts, in place
    CollArgs across = a;
    across.count = per_host * a.count;
    across.send = host_region;
    const char* name = across.bytes() <= comm.chunk_bytes() ? "rd" : "ring";
    run_phase(registered(CollKind::allgather, name), comm, p.leaders, p.my_host, across, phase_slots(1), false);
  }

  CollArgs down = a;  // 3. everything to the host's other ranks
  down.kind = CollKind::broadcast;
  down.count = static_cast<size_t>(comm.size()) * a.count;
  down.root = p.leader_local;
  down.send = a.recv;
  run_phase(registered(CollKind::broadcast, "tree"), comm, p.local, p.my_local, down, phase_slots(2), false);
}

}  // namespace

extern const Algorithm kAllgatherHier;
const Algorithm kAllgatherHier{"hier", CollKind::allgather, supports, run};

}  // namespace kolo::algo

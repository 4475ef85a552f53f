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

double predict(const CostQuery& q) {
  // Gather to the leader (direct, shm), the leaders' all-gather of host regions L*n (rd
  // within one chunk, else ring; net), broadcast of the whole P*n inside the host (shm).
  const int P = q.shape.ranks, H = q.shape.hosts, L = q.shape.per_host;
  const double n = q.bytes, block = static_cast<double>(L) * n;
  const LinkCost& net = q.model.net;
  double across = 0;
  if (H > 1 && block <= q.model.chunk) {
    const int h2 = cost::floor_pow2(H);
    across = cost::ceil_log2(h2) * net.alpha + (h2 - 1) * block * net.beta;
    if (h2 != H) across += net.time(block) + net.time(H * block);
  } else {
    across = cost::ring_pass(q, H, block, net, false);
  }
  return (L - 1) * q.model.shm.time(n) + across + cost::binomial_bcast(L, static_cast<double>(P) * n, q.model.shm);
}

}  // namespace

const Algorithm kAllgatherHier{
    .name = "hier",
    .wire_id = 24,
    .serves = {CollKind::allgather},
    .run = run,
    .supports = supports,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kAllgatherHier);

}  // namespace kolo::algo

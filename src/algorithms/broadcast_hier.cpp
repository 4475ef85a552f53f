// Broadcast "hier": the root's data goes to one leader per host (the root leads its own host),
// then from each leader to the ranks of its host. Across hosts it takes a pipelined ring once
// the buffer spans a chunk per leader, else a binomial tree; inside a host a binomial tree.
#include "algorithms/hierarchy.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const HostPlan p = plan_hosts(comm, a.root);
  void* buf = a.recv != nullptr ? a.recv : const_cast<void*>(a.send);

  if (p.is_leader()) {
    CollArgs across = a;
    across.root = comm.hosts().host_of[static_cast<size_t>(a.root)];
    across.recv = buf;
    across.send = comm.rank() == a.root ? a.send : buf;
    const size_t leaders = p.leaders.size();
    const char* name = leaders > 2 && a.bytes() / leaders >= comm.chunk_bytes() ? "ring" : "tree";
    run_phase(registered(CollKind::broadcast, name), comm, p.leaders, p.my_host, across, phase_slots(0), false);
  }

  CollArgs down = a;
  down.root = p.leader_local;
  down.send = buf;
  down.recv = buf;
  run_phase(registered(CollKind::broadcast, "tree"), comm, p.local, p.my_local, down, phase_slots(1), false);
}

double predict(const CostQuery& q) {
  // Among the leaders (chain when there are more than two hosts and a host's share spans a
  // chunk, else binomial; net), then inside each host (binomial, shm).
  const int H = q.shape.hosts, L = q.shape.per_host;
  const double n = q.bytes;
  const bool chain = H > 2 && n / H >= q.model.chunk;
  const double across = chain ? cost::chain_bcast(q, H, n, q.model.net) : cost::binomial_bcast(H, n, q.model.net);
  return across + cost::binomial_bcast(L, n, q.model.shm);
}

}  // namespace

const Algorithm kBroadcastHier{
    .name = "hier",
    .wire_id = 23,
    .serves = {CollKind::broadcast},
    .run = run,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kBroadcastHier);

}  // namespace kolo::algo

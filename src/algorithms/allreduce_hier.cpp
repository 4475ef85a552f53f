// Allreduce "hier": reduce inside each host to its leader (binomial tree over shared memory),
// allreduce across hosts among the leaders (ring, or recursive doubling for a message within
// one chunk), broadcast inside each host from the leader. Only the leaders' traffic crosses
// hosts; every rank ends with the leader's bits, so ranks agree bit for bit.
#include "algorithms/hierarchy.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const HostPlan p = plan_hosts(comm);

  CollArgs up = a;  // 1. partial sums meet at the leader, in its recv (no finalize yet)
  up.kind = CollKind::reduce;
  up.root = p.leader_local;
  run_phase(registered(CollKind::reduce, "tree"), comm, p.local, p.my_local, up, phase_slots(0), false);

  if (p.is_leader()) {  // 2. the leaders combine the hosts' sums in place, and finalize
    CollArgs across = a;
    across.send = a.recv;
    const char* name = a.bytes() <= comm.chunk_bytes() ? "rd" : "ring";
    run_phase(registered(CollKind::allreduce, name), comm, p.leaders, p.my_host, across, phase_slots(1), true);
  }

  CollArgs down = a;  // 3. the result goes back to the host's other ranks
  down.kind = CollKind::broadcast;
  down.root = p.leader_local;
  down.send = a.recv;
  run_phase(registered(CollKind::broadcast, "tree"), comm, p.local, p.my_local, down, phase_slots(2), false);
}

double predict(const CostQuery& q) {
  // Reduce to the leader (binomial, shm), the leaders' all-reduce (rd within one chunk, else
  // ring; net), broadcast back (binomial, shm).
  const int H = q.shape.hosts, L = q.shape.per_host;
  const double n = q.bytes;
  const double across = n <= q.model.chunk ? cost::rd_allreduce_flat(q, H, n, q.model.net)
                                           : cost::ring_allreduce(q, H, n, q.model.net);
  return cost::binomial_reduce(q, L, n, q.model.shm) + across + cost::binomial_bcast(L, n, q.model.shm);
}

}  // namespace

const Algorithm kAllreduceHier{
    .name = "hier",
    .wire_id = 22,
    .serves = {CollKind::allreduce},
    .run = run,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kAllreduceHier);

}  // namespace kolo::algo

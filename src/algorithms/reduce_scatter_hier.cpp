// Reduce-scatter "hier", for groups whose hosts hold equal, consecutive blocks of ranks
// (HostLayout::uniform_blocks): each host reduces the whole input at its leader (into
// scratch), the leaders reduce-scatter across hosts so that each gets its host's blocks fully
// reduced (and finalized), and each leader scatters those blocks to its host's ranks.
#include "algorithms/hierarchy.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

bool supports(const CollArgs&, const HostLayout& hosts) { return hosts.uniform_blocks(); }

void run(Comm& comm) {
  // Selection never picks this for other layouts (supports); a direct call still gets a
  // correct result, from the flat ring.
  if (!comm.hosts().uniform_blocks()) return registered(CollKind::reduce_scatter, "ring").run(comm);
  const CollArgs& a = comm.args();
  const HostPlan p = plan_hosts(comm);
  const size_t per_host = p.local.size(), es = a.elem_size();
  const size_t total = static_cast<size_t>(comm.size()) * a.count;
  char* sums = p.is_leader() ? static_cast<char*>(comm.scratch(total * es, 0)) : nullptr;
  char* host_blocks = p.is_leader() ? byte_at(sums, static_cast<size_t>(p.my_host) * per_host * a.count, es) : nullptr;

  CollArgs up = a;  // 1. the host's partial sums of the whole input, at the leader
  up.kind = CollKind::reduce;
  up.count = total;
  up.root = p.leader_local;
  up.recv = sums;
  run_phase(registered(CollKind::reduce, "tree"), comm, p.local, p.my_local, up, phase_slots(0), false);

  if (p.is_leader()) {  // 2. each leader gets its host's blocks, fully reduced and finalized
    CollArgs across = a;
    across.count = per_host * a.count;
    across.send = sums;
    across.recv = host_blocks;
    const char* name = across.bytes() <= comm.chunk_bytes() ? "direct" : "ring";
    run_phase(registered(CollKind::reduce_scatter, name), comm, p.leaders, p.my_host, across, phase_slots(1), true);
  }

  CollArgs down = a;  // 3. one block to each rank of the host
  down.kind = CollKind::scatter;
  down.root = p.leader_local;
  down.send = host_blocks;
  run_phase(registered(CollKind::scatter, "direct"), comm, p.local, p.my_local, down, phase_slots(2), false);
}

double predict(const CostQuery& q) {
  // Whole input to the leader (binomial reduce of P*n, shm), the leaders' reduce-scatter of
  // host blocks L*n (direct within one chunk, else ring; net), scatter to the host (shm).
  const int P = q.shape.ranks, H = q.shape.hosts, L = q.shape.per_host;
  const double n = q.bytes, block = static_cast<double>(L) * n;
  const double across = H <= 1 ? 0
                        : block <= q.model.chunk ? (H - 1) * (q.model.net.time(block) + block * q.model.gamma)
                                                 : cost::ring_pass(q, H, block, q.model.net, true);
  return cost::binomial_reduce(q, L, static_cast<double>(P) * n, q.model.shm) + across + (L - 1) * q.model.shm.time(n);
}

}  // namespace

const Algorithm kReduceScatterHier{
    .name = "hier",
    .wire_id = 25,
    .serves = {CollKind::reduce_scatter},
    .run = run,
    .supports = supports,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kReduceScatterHier);

}  // namespace kolo::algo

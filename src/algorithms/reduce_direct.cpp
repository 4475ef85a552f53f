// Reduce "direct": every rank sends its input to the root, which reduces the P inputs in rank
// order (deterministic whatever the arrival order). One round of messages: latency-optimal
// for small inputs.

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/rank_order_reduce.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank(), root = a.root;
  const size_t es = a.elem_size(), n = a.count, bytes = n * es;
  if (r != root) {
    comm.wait(comm.isend(root, a.send, bytes));
    return;
  }
  // Slot 0: one input from each peer; slot 1: room to save the in-place input.
  char* arrived = static_cast<char*>(comm.scratch(static_cast<size_t>(P) * bytes, 0));
  TempList<const void*> blocks(comm, static_cast<size_t>(P));
  TempList<Req> arrivals(comm, static_cast<size_t>(P));
  for (int i = 0; i < P; ++i) {
    if (i == r) continue;
    char* dst = byte_at(arrived, static_cast<size_t>(i) * n, es);
    blocks[static_cast<size_t>(i)] = dst;
    arrivals[static_cast<size_t>(i)] = comm.irecv(i, dst, bytes);
  }
  blocks[static_cast<size_t>(r)] = a.send;
  void* spare = a.recv == a.send && P > 2 ? comm.scratch(bytes, 1) : nullptr;
  reduce_in_rank_order(comm, a.recv, blocks, arrivals, n, spare);
}

double predict(const CostQuery& q) {
  return cost::into_root(q, q.bytes) + (q.shape.ranks - 1) * q.bytes * q.model.gamma;
}

}  // namespace

const Algorithm kReduceDirect{
    .name = "direct",
    .wire_id = 11,
    .serves = {CollKind::reduce},
    .run = run,
    .cost = predict,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kReduceDirect);

}  // namespace kolo::algo

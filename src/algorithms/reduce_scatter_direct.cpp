// Reduce-scatter "direct": every rank sends block i of its input straight to rank i, and each
// rank reduces the P blocks it gets in rank order (deterministic whatever the arrival order).
// One round of messages: latency-optimal for small blocks.

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/rank_order_reduce.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t es = a.elem_size(), n = a.count, bytes = n * es;
  const char* send = static_cast<const char*>(a.send);
  auto block = [&](int b) { return byte_at(send, static_cast<size_t>(b) * n, es); };
  // Slot 0: one block from each peer; slot 1: room to save the in-place input block.
  char* arrived = static_cast<char*>(comm.scratch(static_cast<size_t>(P) * bytes, 0));
  TempList<const void*> blocks(comm, static_cast<size_t>(P));
  TempList<Req> arrivals(comm, static_cast<size_t>(P));
  for (int i = 1; i < P; ++i) {
    const int from = add_mod(r, i, P);
    char* dst = byte_at(arrived, static_cast<size_t>(from) * n, es);
    blocks[static_cast<size_t>(from)] = dst;
    arrivals[static_cast<size_t>(from)] = comm.irecv(from, dst, bytes);
  }
  blocks[static_cast<size_t>(r)] = block(r);
  TempList<Req> sends(comm);
  for (int i = 1; i < P; ++i) {
    const int to = add_mod(r, i, P);
    sends.push_back(comm.isend(to, block(to), bytes));
  }
  void* spare = a.recv == block(r) && P > 2 ? comm.scratch(bytes, 1) : nullptr;
  reduce_in_rank_order(comm, a.recv, blocks, arrivals, n, spare);
  comm.wait_all(sends);
}

double predict(const CostQuery& q) {
  const int P = q.shape.ranks;
  return P <= 1 ? 0 : cost::all_to_all_round(q, q.bytes) + (P - 1) * q.bytes * q.model.gamma;
}

}  // namespace

const Algorithm kReduceScatterDirect{
    .name = "direct",
    .wire_id = 4,
    .serves = {CollKind::reduce_scatter},
    .run = run,
    .cost = predict,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kReduceScatterDirect);

}  // namespace kolo::algo

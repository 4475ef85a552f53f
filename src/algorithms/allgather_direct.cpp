// All-gather "direct": every rank sends its block to every other rank at once (one round of
// messages; latency-optimal for small blocks and few ranks).

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t es = a.elem_size(), n = a.count, bytes = n * es;
  char* recv = static_cast<char*>(a.recv);
  auto block = [&](int b) { return byte_at(recv, static_cast<size_t>(b) * n, es); };
  TempList<Req> reqs(comm);
  reqs.reserve(2 * static_cast<size_t>(P));
  // Start with the next rank so that not everybody talks to rank 0 first.
  for (int i = 1; i < P; ++i) {
    const int from = ring_mod(r - i, P);
    reqs.push_back(comm.irecv(from, block(from), bytes));
  }
  for (int i = 1; i < P; ++i) reqs.push_back(comm.isend(add_mod(r, i, P), a.send, bytes));
  copy_unless_same(block(r), a.send, bytes);
  comm.wait_all(reqs);
}

double predict(const CostQuery& q) {
  return cost::all_to_all_round(q, q.bytes);
}

}  // namespace

const Algorithm kAllgatherDirect{
    .name = "direct",
    .wire_id = 6,
    .serves = {CollKind::allgather},
    .run = run,
    .cost = predict,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kAllgatherDirect);

}  // namespace kolo::algo

// Gather "direct": every rank sends its block straight to the root, which receives each into
// its place in recv (one round; the root takes P-1 messages).

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank(), root = a.root;
  const size_t block_bytes = a.bytes();
  if (r != root) {
    comm.wait(comm.isend(root, a.send, block_bytes));
    return;
  }
  char* recv = static_cast<char*>(a.recv);
  TempList<Req> reqs(comm);
  for (int i = 1; i < P; ++i) {
    const int from = add_mod(r, i, P);
    reqs.push_back(comm.irecv(from, recv + static_cast<size_t>(from) * block_bytes, block_bytes));
  }
  copy_unless_same(recv + static_cast<size_t>(r) * block_bytes, a.send, block_bytes);
  comm.wait_all(reqs);
}

double predict(const CostQuery& q) {
  return cost::into_root(q, q.bytes);
}

}  // namespace

const Algorithm kGatherDirect{
    .name = "direct",
    .wire_id = 13,
    .serves = {CollKind::gather},
    .run = run,
    .cost = predict,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kGatherDirect);

}  // namespace kolo::algo

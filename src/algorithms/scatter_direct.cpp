// Scatter "direct": the root sends block i straight to rank i (one round; the root sends P-1
// messages).

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
    comm.wait(comm.irecv(root, a.recv, block_bytes));
    return;
  }
  const char* send = static_cast<const char*>(a.send);
  TempList<Req> sends(comm);
  for (int i = 1; i < P; ++i) {
    const int to = add_mod(r, i, P);
    sends.push_back(comm.isend(to, send + static_cast<size_t>(to) * block_bytes, block_bytes));
  }
  copy_unless_same(a.recv, send + static_cast<size_t>(r) * block_bytes, block_bytes);
  comm.wait_all(sends);
}

double predict(const CostQuery& q) {
  return cost::into_root(q, q.bytes);  // the mirror image of gather
}

}  // namespace

const Algorithm kScatterDirect{
    .name = "direct",
    .wire_id = 15,
    .serves = {CollKind::scatter},
    .run = run,
    .cost = predict,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kScatterDirect);

}  // namespace kolo::algo

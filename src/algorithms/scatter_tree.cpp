// Scatter "tree": a binomial tree from the root. The root sends each child the blocks of the
// child's whole subtree (relative ranks [v, v + size), contiguous) in one message; inner
// nodes keep their own block and pass the rest on: ceil(log2 P) rounds instead of P-1
// messages from the root. Only the root reads send (other ranks may have none).
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/topology.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank(), root = a.root;
  const size_t block_bytes = a.bytes();
  const char* send = static_cast<const char*>(a.send);
  if (r == root) copy_unless_same(a.recv, send + static_cast<size_t>(r) * block_bytes, block_bytes);
  if (P == 1 || block_bytes == 0) return;
  const BinomialNode node = binomial_node(P, root, r);
  TempList<Req> sends(comm);

  if (r == root) {
    // A child's relative range maps to consecutive ranks unless it runs past rank P-1; at
    // most one subtree does, and it is assembled in scratch first.
    for (int child : node.children_rel) {
      const int start = rel_to_rank(child, root, P), blocks = binomial_subtree(P, child);
      const size_t bytes = static_cast<size_t>(blocks) * block_bytes;
      const char* src = send + static_cast<size_t>(start) * block_bytes;
      if (start + blocks > P) {
        char* staged = static_cast<char*>(comm.scratch(bytes, 0));
        const size_t tail = static_cast<size_t>(P - start) * block_bytes;
        std::memcpy(staged, src, tail);
        std::memcpy(staged + tail, send, bytes - tail);
        src = staged;
      }
      sends.push_back(comm.isend(rel_to_rank(child, root, P), src, bytes));
    }
    comm.wait_all(sends);
    return;
  }
  if (node.children_rel.empty()) {
    comm.wait(comm.irecv(node.parent, a.recv, block_bytes));
    return;
  }
  char* subtree = static_cast<char*>(comm.scratch(static_cast<size_t>(node.subtree) * block_bytes, 0));
  comm.wait(comm.irecv(node.parent, subtree, static_cast<size_t>(node.subtree) * block_bytes));
  for (int child : node.children_rel)
    sends.push_back(comm.isend(rel_to_rank(child, root, P), subtree + static_cast<size_t>(child - node.rel) * block_bytes,
                               static_cast<size_t>(binomial_subtree(P, child)) * block_bytes));
  std::memcpy(a.recv, subtree, block_bytes);
  comm.wait_all(sends);
}

double predict(const CostQuery& q) {
  return cost::binomial_gather(q, q.shape.ranks, q.bytes, q.flat());  // the mirror image of gather
}

}  // namespace

const Algorithm kScatterTree{
    .name = "tree",
    .wire_id = 14,
    .serves = {CollKind::scatter},
    .run = run,
    .cost = predict,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kScatterTree);

}  // namespace kolo::algo

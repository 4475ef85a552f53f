// Gather "tree": a binomial tree towards the root. The subtree of relative rank v holds the
// relative ranks [v, v + size), so an inner node collects its subtree's blocks contiguously
// in scratch and forwards them to its parent in one message: ceil(log2 P) rounds instead of
// P-1 messages at the root. Only the root touches recv (other ranks may have none).
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
  char* recv = static_cast<char*>(a.recv);
  if (r == root) copy_unless_same(recv + static_cast<size_t>(r) * block_bytes, a.send, block_bytes);
  if (P == 1 || block_bytes == 0) return;
  const BinomialNode node = binomial_node(P, root, r);
  TempList<Req> reqs(comm);

  if (r == root) {
    // A child's relative range maps to consecutive ranks unless it runs past rank P-1; at
    // most one subtree does, and it is received into scratch and split afterwards.
    char* staged = nullptr;
    int staged_start = 0, staged_blocks = 0;
    for (int child : node.children_rel) {
      const int start = rel_to_rank(child, root, P), blocks = binomial_subtree(P, child);
      const size_t bytes = static_cast<size_t>(blocks) * block_bytes;
      char* dst = recv + static_cast<size_t>(start) * block_bytes;
      if (start + blocks > P) {
        staged = static_cast<char*>(comm.scratch(bytes, 0));
        staged_start = start;
        staged_blocks = blocks;
        dst = staged;
      }
      reqs.push_back(comm.irecv(rel_to_rank(child, root, P), dst, bytes));
    }
    comm.wait_all(reqs);
    if (staged != nullptr) {
      const size_t tail = static_cast<size_t>(P - staged_start) * block_bytes;
      std::memcpy(recv + static_cast<size_t>(staged_start) * block_bytes, staged, tail);
      std::memcpy(recv, staged + tail, static_cast<size_t>(staged_blocks) * block_bytes - tail);
    }
    return;
  }
  if (node.children_rel.empty()) {
    comm.wait(comm.isend(node.parent, a.send, block_bytes));
    return;
  }
  char* subtree = static_cast<char*>(comm.scratch(static_cast<size_t>(node.subtree) * block_bytes, 0));
  std::memcpy(subtree, a.send, block_bytes);
  for (int child : node.children_rel)
    reqs.push_back(comm.irecv(rel_to_rank(child, root, P), subtree + static_cast<size_t>(child - node.rel) * block_bytes,
                              static_cast<size_t>(binomial_subtree(P, child)) * block_bytes));
  comm.wait_all(reqs);
  comm.wait(comm.isend(node.parent, subtree, static_cast<size_t>(node.subtree) * block_bytes));
}

double predict(const CostQuery& q) {
  return cost::binomial_gather(q, q.shape.ranks, q.bytes, q.flat());
}

}  // namespace

const Algorithm kGatherTree{
    .name = "tree",
    .wire_id = 12,
    .serves = {CollKind::gather},
    .run = run,
    .cost = predict,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kGatherTree);

}  // namespace kolo::algo

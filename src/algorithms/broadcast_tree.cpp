// Broadcast "tree": a binomial tree from the root (ceil(log2 P) levels; latency-optimal). The
// buffer moves in chunks of chunk_bytes(): an inner node forwards chunk k to its children
// while chunk k+1 is already arriving, so the levels work on different chunks at once.
#include <algorithm>
#include <iterator>
#include <span>

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/topology.hpp"

namespace kolo::algo {
namespace {

constexpr size_t kRecvsAhead = 8;  // receives posted ahead of the chunk being forwarded

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank(), root = a.root;
  const size_t es = a.elem_size(), n = a.count;
  char* buf = broadcast_buffer(a, r);
  if (P == 1 || n == 0) return;
  const BinomialNode node = binomial_node(P, root, r);
  const size_t per_chunk = chunk_elems(comm), nchunks = num_chunks(n, per_chunk);
  if (nchunks == 1) {
    // The loop below for one chunk, without its request lists (small broadcasts, where their
    // bookkeeping was a tenth of the call): the same messages in the same order.
    if (node.parent >= 0) comm.wait(comm.irecv(node.parent, buf, n * es));
    Req sends[std::size(ChildList{}.v)];
    size_t k = 0;
    for (int child : node.children_rel) sends[k++] = comm.isend(rel_to_rank(child, root, P), buf, n * es);
    comm.wait_all(std::span<Req>(sends, k));
    return;
  }
  const Span all{0, n};
  TempList<Req> recvs(comm, nchunks), sends(comm);
  sends.reserve(nchunks * node.children_rel.size());
  size_t posted = 0;
  for (size_t j = 0; j < nchunks; ++j) {
    const Span c = chunk_of(all, per_chunk, j);
    if (node.parent >= 0) {
      for (; posted < std::min(nchunks, j + kRecvsAhead); ++posted) {
        const Span p = chunk_of(all, per_chunk, posted);
        recvs[posted] = comm.irecv(node.parent, byte_at(buf, p.offset, es), p.count * es);
      }
      comm.wait(recvs[j]);
    }
    for (int child : node.children_rel)
      sends.push_back(comm.isend(rel_to_rank(child, root, P), byte_at(buf, c.offset, es), c.count * es));
  }
  comm.wait_all(sends);
}

double predict(const CostQuery& q) {
  return cost::binomial_bcast(q.shape.ranks, q.bytes, q.flat());
}

}  // namespace

const Algorithm kBroadcastTree{
    .name = "tree",
    .wire_id = 9,
    .serves = {CollKind::broadcast},
    .run = run,
    .cost = predict,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kBroadcastTree);

}  // namespace kolo::algo

// All-reduce "tree": NCCL's double binary tree. The data is cut in two halves; half t is
// reduced up tree t, finalized at its root and broadcast back down tree t. The two trees are
// complementary (topology.hpp), so both halves progress at once over different links.
//
// Both halves move in chunks of chunk_bytes(), pipelined: a rank runs iterations c = 0, 1, ...
// and in iteration c
//   A. posts the receives of chunk c from its children (both trees),
//   B. reduces chunk c (own input op children's partial results) and sends it to its parent;
//      the root finalizes it instead,
//   C. posts the receive of the chunk its parent forwards in this iteration,
//   D. forwards to its children the chunk that arrived kDownLag iterations ago (the root: the
//      chunk it finalized kDownLag iterations ago).
// A node at depth d thus forwards chunk x in iteration x + (d+1)*kDownLag, and its child
// posts the matching receive in that same iteration. Sends and receives between any two ranks
// are therefore posted in the same order on both sides (A/B before C/D, tree 0 before tree 1,
// iteration by iteration), even where the two trees share an edge. Nothing ever waits for a
// message that is sent later in the sender's own order, so it cannot deadlock, and the lag
// lets every level run a few chunks ahead instead of waiting for a round trip to the root.
//
// Every element is reduced on the way up along one fixed path and finalized once at its root,
// so all ranks end with bit-identical results.
#include <algorithm>

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/topology.hpp"

namespace kolo::algo {
namespace {

constexpr size_t kDownLag = 2;

struct TreeRole {
  BinaryTreeNode node;
  Span half;  // the elements this tree carries
  size_t nchunks = 0;
  char* from_child[2] = {nullptr, nullptr};  // one chunk of scratch per child
  Req up_recv[2];
  std::span<Req> up_sends;    // by chunk; waited before the chunk's memory receives the result
  std::span<Req> down_recvs;  // by chunk
  bool is_root() const { return node.parent < 0; }
};

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t es = a.elem_size();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  if (P == 1) {
    result_is_own_input(comm);
    return;
  }
  const size_t per_chunk = chunk_elems(comm);
  char* scratch = static_cast<char*>(comm.scratch(4 * per_chunk * es, 0));
  const size_t first_half = (a.count + 1) / 2;
  TreeRole roles[2];
  size_t iterations = 0;
  for (int t = 0; t < 2; ++t) {
    TreeRole& tr = roles[t];
    tr.node = double_binary_tree_node(P, r, t);
    tr.half = t == 0 ? Span{0, first_half} : Span{first_half, a.count - first_half};
    tr.nchunks = num_chunks(tr.half.count, per_chunk);
    for (int k = 0; k < 2; ++k) tr.from_child[k] = scratch + static_cast<size_t>(2 * t + k) * per_chunk * es;
    tr.up_sends = temp_array<Req>(comm, tr.nchunks);
    tr.down_recvs = temp_array<Req>(comm, tr.nchunks);
    if (tr.nchunks > 0)
      iterations = std::max(iterations, tr.nchunks + (static_cast<size_t>(tr.node.depth) + 1) * kDownLag);
  }
  auto bytes_of = [&](const TreeRole& tr, size_t j) { return chunk_of(tr.half, per_chunk, j).count * es; };
  auto at = [&](auto* base, const TreeRole& tr, size_t j) { return byte_at(base, chunk_of(tr.half, per_chunk, j).offset, es); };
  // Sets x to chunk c - lag and says whether that is one of tree tr's chunks.
  auto lagged = [](size_t c, size_t lag, const TreeRole& tr, size_t& x) {
    if (c < lag) return false;
    x = c - lag;
    return x < tr.nchunks;
  };

  TempList<Req> down_sends(comm);
  for (size_t c = 0; c < iterations; ++c) {
    // A. Receives of chunk c from the children.
    for (TreeRole& tr : roles) {
      if (c >= tr.nchunks) continue;
      for (int k = 0; k < tr.node.nchildren; ++k)
        tr.up_recv[k] = comm.irecv(tr.node.children[k], tr.from_child[k], bytes_of(tr, c));
    }
    // B. Reduce chunk c and pass it up (finalize at the root).
    for (TreeRole& tr : roles) {
      if (c >= tr.nchunks) continue;
      const size_t n = chunk_of(tr.half, per_chunk, c).count;
      const char* result = at(send, tr, c);  // a leaf passes its own input on untouched
      if (tr.node.nchildren > 0) {
        char* dst = at(recv, tr, c);
        comm.wait(tr.up_recv[0]);
        comm.reduce(dst, at(send, tr, c), tr.from_child[0], n);
        if (tr.node.nchildren > 1) {
          comm.wait(tr.up_recv[1]);
          comm.reduce(dst, tr.from_child[1], n);
        }
        result = dst;
      }
      if (tr.is_root()) {
        copy_unless_same(at(recv, tr, c), result, n * es);
        comm.finalize(at(recv, tr, c), n);
      } else {
        tr.up_sends[c] = comm.isend(tr.node.parent, result, n * es);
      }
    }
    // C. Receive the chunk the parent forwards in this iteration, into its final place, once
    // the partial result that occupied that place (or this rank's in-place input) has left.
    for (TreeRole& tr : roles) {
      size_t x;
      if (tr.is_root() || !lagged(c, static_cast<size_t>(tr.node.depth) * kDownLag, tr, x)) continue;
      comm.wait(tr.up_sends[x]);
      tr.down_recvs[x] = comm.irecv(tr.node.parent, at(recv, tr, x), bytes_of(tr, x));
    }
    // D. Forward the chunk that arrived kDownLag iterations ago.
    for (TreeRole& tr : roles) {
      size_t x;
      if (!lagged(c, (static_cast<size_t>(tr.node.depth) + 1) * kDownLag, tr, x)) continue;
      if (!tr.is_root()) comm.wait(tr.down_recvs[x]);
      for (int k = 0; k < tr.node.nchildren; ++k)
        down_sends.push_back(comm.isend(tr.node.children[k], at(recv, tr, x), bytes_of(tr, x)));
    }
  }
  comm.wait_all(down_sends);
}

double predict(const CostQuery& q) {
  // Double binary tree: halves of n up and down two trees, pipelined over D levels. A rank
  // takes up to f = 2 children's share of each half (f n/2 bytes in, reduced) and sends one
  // share in each tree, up and then down. Each phase: the first chunk crosses the D levels
  // one after the other, then the rest of the half streams with every level busy.
  // Across hosts the trees are laid over rank order, so a host's block of L ranks has tree
  // edges leaving it from more than one of its ranks: about two per tree and direction (the
  // block's own subtree root, and children at its borders). They share the host's link only
  // while the stream keeps every level busy, not during the first chunk's descent.
  const GroupShape& g = q.shape;
  const int P = g.ranks;
  if (P <= 1) return 0;
  const double half = q.bytes / 2, s = q.chunk_of(half), fan = std::min(2, P - 1);
  const LinkCost& l = q.flat();
  const double share = g.hosts > 1 ? std::min(2, g.per_host) : 1;
  const double phase = cost::ceil_log2(P) * l.time(fan * s) + fan * (half - s) * l.beta * share;
  return 2 * phase + fan * half * q.model.gamma;
}

}  // namespace

const Algorithm kAllreduceTree{
    .name = "tree",
    .wire_id = 1,
    .serves = {CollKind::allreduce},
    .run = run,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kAllreduceTree);

}  // namespace kolo::algo

// Reduce "tree": a binomial tree towards the root (ceil(log2 P) levels). Every node combines
// its own input with its children's partial results, chunk by chunk, and passes the chunk up
// while the next ones arrive; the root finalizes each chunk into recv. Only the root touches
// recv (other ranks may have none); partial results of inner nodes live in scratch.
//
// The combination order at each node is fixed (own input, then children in a fixed order),
// so the result does not depend on timing.
#include <algorithm>

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/topology.hpp"

namespace kolo::algo {
namespace {

constexpr size_t kWindow = 4;  // chunks in flight per child (and partial results in flight up)

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank(), root = a.root;
  const size_t es = a.elem_size(), n = a.count;
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  if (P == 1) {
    result_is_own_input(comm);
    return;
  }
  if (n == 0) return;  // every rank knows count: nothing to move
  const BinomialNode node = binomial_node(P, root, r);
  const bool is_root = node.parent < 0;
  const size_t nchildren = node.children_rel.size();
  const size_t per_chunk = chunk_elems(comm), nchunks = num_chunks(n, per_chunk);
  const size_t chunk_bytes = per_chunk * es;
  const Span all{0, n};
  // Slot 0: kWindow chunks per child; slot 1: kWindow partial results (inner non-root nodes).
  char* from_children = nchildren > 0 ? static_cast<char*>(comm.scratch(kWindow * nchildren * chunk_bytes, 0)) : nullptr;
  char* partials = nchildren > 0 && !is_root ? static_cast<char*>(comm.scratch(kWindow * chunk_bytes, 1)) : nullptr;
  auto child_buf = [&](size_t j, size_t k) { return from_children + ((j % kWindow) * nchildren + k) * chunk_bytes; };
  TempList<Req> recvs(comm, nchunks * nchildren), sends(comm, nchunks);
  size_t posted = 0;
  for (size_t j = 0; j < nchunks; ++j) {
    const Span c = chunk_of(all, per_chunk, j);
    // Chunks up to j + kWindow - 1 may be in flight: their buffers held chunks <= j - 1,
    // already reduced.
    for (; posted < std::min(nchunks, j + kWindow); ++posted) {
      const size_t bytes = chunk_of(all, per_chunk, posted).count * es;
      for (size_t k = 0; k < nchildren; ++k)
        recvs[posted * nchildren + k] =
            comm.irecv(rel_to_rank(node.children_rel[k], root, P), child_buf(posted, k), bytes);
    }
    const char* own = byte_at(send, c.offset, es);
    const char* result = own;  // a leaf passes its input up untouched
    if (nchildren > 0) {
      char* dst = is_root ? byte_at(recv, c.offset, es) : partials + (j % kWindow) * chunk_bytes;
      if (!is_root && j >= kWindow) {  // dst's previous contents must have left
        comm.wait(sends[j - kWindow]);
        sends[j - kWindow] = Req{};
      }
      comm.wait(recvs[j * nchildren]);
      comm.reduce(dst, own, child_buf(j, 0), c.count);
      for (size_t k = 1; k < nchildren; ++k) {
        comm.wait(recvs[j * nchildren + k]);
        comm.reduce(dst, child_buf(j, k), c.count);
      }
      result = dst;
    }
    if (is_root) {
      comm.finalize(byte_at(recv, c.offset, es), c.count);
    } else {
      sends[j] = comm.isend(node.parent, result, c.count * es);
    }
  }
  comm.wait_all(sends);
}

double predict(const CostQuery& q) {
  return cost::binomial_reduce(q, q.shape.ranks, q.bytes, q.flat());
}

}  // namespace

const Algorithm kReduceTree{.name = "tree", .wire_id = 10, .serves = {CollKind::reduce}, .run = run, .cost = predict};
KOLO_REGISTER_ALGORITHM(kReduceTree);

}  // namespace kolo::algo

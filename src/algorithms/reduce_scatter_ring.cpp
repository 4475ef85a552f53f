// Reduce-scatter "ring": in step s rank r sends its partial result for block r-s-1 to r+1 and
// reduces block r-s-2 arriving from r-1 with its own input; after P-1 steps the block it
// reduced last is block r, complete, and it is finalized straight into recv.
//
// Partial results of other blocks cannot live in send (never written out-of-place) nor in
// recv (one block only), so they alternate between two block-sized scratch buffers: the one
// filled in step s is sent in step s+1 while the other is refilled. Blocks move in chunks of
// chunk_bytes(); incoming chunks land in two scratch buffers used alternately, so the receive
// of chunk k+1 is in flight while chunk k is reduced.
#include <algorithm>

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t es = a.elem_size(), n = a.count;
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  auto block = [&](int b) { return byte_at(send, static_cast<size_t>(b) * n, es); };
  if (P == 1) {
    result_is_own_input(comm);
    return;
  }
  if (n == 0) return;  // every rank knows count: nothing to move
  const size_t per_chunk = chunk_elems(comm);
  const size_t nchunks = num_chunks(n, per_chunk);
  char* incoming_mem = static_cast<char*>(comm.scratch(2 * per_chunk * es, 0));
  char* incoming[2] = {incoming_mem, incoming_mem + per_chunk * es};
  char* partial_mem = static_cast<char*>(comm.scratch(2 * n * es, 1));
  char* partial[2] = {partial_mem, partial_mem + n * es};
  const int next = (r + 1) % P, prev = ring_mod(r - 1, P);

  for (int s = 0; s < P - 1; ++s) {
    const bool last = s == P - 2;
    const char* out = s == 0 ? block(ring_mod(r - 1, P)) : partial[(s - 1) % 2];
    const char* own = block(ring_mod(r - s - 2, P));  // this rank's input for the arriving block
    char* result = last ? recv : partial[s % 2];
    TempList<Req> sends(comm);
    sends.reserve(nchunks);
    Req pending[2];
    auto post_recv = [&](size_t j) {
      pending[j % 2] = comm.irecv(prev, incoming[j % 2], chunk_of(Span{0, n}, per_chunk, j).count * es);
    };
    post_recv(0);
    for (size_t j = 0; j < nchunks; ++j) {
      const Span c = chunk_of(Span{0, n}, per_chunk, j);
      sends.push_back(comm.isend(next, byte_at(out, c.offset, es), c.count * es));
      if (j + 1 < nchunks) post_recv(j + 1);  // its buffer held chunk j-1, already reduced
      comm.wait(pending[j % 2]);
      char* dst = byte_at(result, c.offset, es);
      comm.reduce(dst, byte_at(own, c.offset, es), incoming[j % 2], c.count);
      if (last) comm.finalize(dst, c.count);
    }
    comm.wait_all(sends);  // the partial buffer sent now is refilled in step s+2
  }
}

double predict(const CostQuery& q) {
  return cost::ring_pass(q, q.shape.ranks, q.bytes, q.flat(), true);
}

}  // namespace

const Algorithm kReduceScatterRing{
    .name = "ring",
    .wire_id = 3,
    .serves = {CollKind::reduce_scatter},
    .run = run,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kReduceScatterRing);

}  // namespace kolo::algo

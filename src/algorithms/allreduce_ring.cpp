// All-reduce "ring": a reduce-scatter around the ring followed by an all-gather around it
// (bandwidth-optimal: every rank sends and receives 2(P-1)/P of the data).
//
// The data is cut into P segments as equal as possible (empty ones when count < P). In step s
// of the reduce-scatter rank r sends segment r-s to r+1 and reduces segment r-s-1 arriving
// from r-1 into its output; after P-1 steps rank r holds segment r+1 fully reduced, computed
// on that rank alone, so every rank ends with bit-identical results once it is all-gathered.
// Segments move in chunks of chunk_bytes(); incoming chunks land in two scratch buffers used
// alternately, so the receive of chunk k+1 is in flight while chunk k is reduced.
#include <algorithm>

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

struct Ring {
  Comm& comm;
  const size_t es;
  const size_t per_chunk;
  const char* send;
  char* recv;
  int next, prev;
};

// One reduce-scatter step: ship `out` (from `out_base`) to the next rank while reducing `in`,
// arriving from the previous rank, into recv (local contribution read from send). `finalize`
// marks the step that completes the segment.
void reduce_step(Ring& ring, const char* out_base, Span out, Span in, char* incoming[2], bool finalize) {
  Comm& comm = ring.comm;
  const size_t n_out = num_chunks(out.count, ring.per_chunk), n_in = num_chunks(in.count, ring.per_chunk);
  TempList<Req> sends(comm);
  sends.reserve(n_out);
  Req pending[2];
  auto post_recv = [&](size_t j) {
    Span c = chunk_of(in, ring.per_chunk, j);
    pending[j % 2] = comm.irecv(ring.prev, incoming[j % 2], c.count * ring.es);
  };
  if (n_in > 0) post_recv(0);
  for (size_t j = 0; j < std::max(n_out, n_in); ++j) {
    if (j < n_out) {
      Span c = chunk_of(out, ring.per_chunk, j);
      sends.push_back(comm.isend(ring.next, byte_at(out_base, c.offset, ring.es), c.count * ring.es));
    }
    if (j + 1 < n_in) post_recv(j + 1);  // the buffer it lands in held chunk j-1, already reduced
    if (j < n_in) {
      Span c = chunk_of(in, ring.per_chunk, j);
      comm.wait(pending[j % 2]);
      char* dst = byte_at(ring.recv, c.offset, ring.es);
      comm.reduce(dst, byte_at(ring.send, c.offset, ring.es), incoming[j % 2], c.count);
      if (finalize) comm.finalize(dst, c.count);
    }
  }
  comm.wait_all(sends);
}

// One all-gather step: forward the finished segment `out` and receive `in`, both in recv.
void gather_step(Ring& ring, Span out, Span in) {
  Comm& comm = ring.comm;
  const size_t n_out = num_chunks(out.count, ring.per_chunk), n_in = num_chunks(in.count, ring.per_chunk);
  TempList<Req> reqs(comm);
  reqs.reserve(n_out + n_in);
  for (size_t j = 0; j < std::max(n_out, n_in); ++j) {
    if (j < n_in) {
      Span c = chunk_of(in, ring.per_chunk, j);
      reqs.push_back(comm.irecv(ring.prev, byte_at(ring.recv, c.offset, ring.es), c.count * ring.es));
    }
    if (j < n_out) {
      Span c = chunk_of(out, ring.per_chunk, j);
      reqs.push_back(comm.isend(ring.next, byte_at(ring.recv, c.offset, ring.es), c.count * ring.es));
    }
  }
  comm.wait_all(reqs);
}

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
  Ring ring{comm, es, chunk_elems(comm), send, recv, (r + 1) % P, ring_mod(r - 1, P)};
  char* scratch = static_cast<char*>(comm.scratch(2 * ring.per_chunk * es, 0));
  char* incoming[2] = {scratch, scratch + ring.per_chunk * es};

  // Reduce-scatter. Step 0 sends this rank's own input; later steps forward the partial sums
  // the previous step left in recv.
  for (int s = 0; s < P - 1; ++s) {
    Span out = block_of(a.count, P, ring_mod(r - s, P));
    Span in = block_of(a.count, P, ring_mod(r - s - 1, P));
    reduce_step(ring, s == 0 ? send : recv, out, in, incoming, s == P - 2);
  }
  // All-gather: rank r starts with segment r+1, the one it finished.
  for (int s = 0; s < P - 1; ++s)
    gather_step(ring, block_of(a.count, P, ring_mod(r + 1 - s, P)), block_of(a.count, P, ring_mod(r - s, P)));
}

double predict(const CostQuery& q) {
  return cost::ring_allreduce(q, q.shape.ranks, q.bytes, q.flat());
}

}  // namespace

const Algorithm kAllreduceRing{
    .name = "ring",
    .wire_id = 0,
    .serves = {CollKind::allreduce},
    .run = run,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kAllreduceRing);

}  // namespace kolo::algo

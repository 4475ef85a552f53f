// All-gather "ring": in step s rank r forwards block r-s to r+1 and receives block r-s-1 from
// r-1, straight into its place in recv (bandwidth-optimal). Blocks move in chunks of
// chunk_bytes(), all chunks of a step in flight together.
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
  char* recv = static_cast<char*>(a.recv);
  auto block = [&](int b) { return byte_at(recv, static_cast<size_t>(b) * n, es); };
  copy_unless_same(block(r), a.send, n * es);
  if (P == 1 || n == 0) return;
  const size_t per_chunk = chunk_elems(comm), nchunks = num_chunks(n, per_chunk);
  const int next = (r + 1) % P, prev = ring_mod(r - 1, P);
  TempList<Req> reqs(comm);
  reqs.reserve(2 * nchunks);
  for (int s = 0; s < P - 1; ++s) {
    char* out = block(ring_mod(r - s, P));
    char* in = block(ring_mod(r - s - 1, P));
    for (size_t j = 0; j < nchunks; ++j) {
      const Span c = chunk_of(Span{0, n}, per_chunk, j);
      reqs.push_back(comm.irecv(prev, byte_at(in, c.offset, es), c.count * es));
      reqs.push_back(comm.isend(next, byte_at(out, c.offset, es), c.count * es));
    }
    comm.wait_all(reqs);  // the block received now is forwarded in the next step
    reqs.clear();
  }
}

}  // namespace

extern const Algorithm kAllgatherRing;
const Algorithm kAllgatherRing{"ring", CollKind::allgather, nullptr, run};

}  // namespace kolo::algo

// Broadcast "ring": a pipeline along the chain root, root+1, ..., root-1. The buffer moves in
// chunks of chunk_bytes(); each rank forwards chunk k as soon as it has arrived, while later
// chunks are already on their way to it, so for many chunks the time approaches that of one
// transfer of the buffer whatever the number of ranks (bandwidth-optimal for large buffers).
#include <algorithm>

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

constexpr size_t kRecvsAhead = 8;  // receives posted ahead of the chunk being forwarded

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank(), root = a.root;
  const size_t es = a.elem_size(), n = a.count;
  char* buf = broadcast_buffer(a, r);
  if (P == 1 || n == 0) return;
  const int pos = ring_mod(r - root, P);
  const int prev = pos > 0 ? ring_mod(r - 1, P) : -1, next = pos < P - 1 ? (r + 1) % P : -1;
  // A chain of two forwards nothing, so chunks would pipeline nothing: one message lets the
  // transport copy it once (shared memory from KOLO_SHM_CMA_MIN_BYTES, with both ranks copying;
  // 2 ranks, 4 MiB took 0.48 ms in 512 KiB chunks, 0.40 whole: docs/PERFORMANCE.md).
  const size_t per_chunk = P == 2 ? n : chunk_elems(comm), nchunks = num_chunks(n, per_chunk);
  const Span all{0, n};
  TempList<Req> recvs(comm, nchunks), sends(comm);
  sends.reserve(next >= 0 ? nchunks : 0);
  size_t posted = 0;
  for (size_t j = 0; j < nchunks; ++j) {
    if (prev >= 0) {
      for (; posted < std::min(nchunks, j + kRecvsAhead); ++posted) {
        const Span c = chunk_of(all, per_chunk, posted);
        recvs[posted] = comm.irecv(prev, byte_at(buf, c.offset, es), c.count * es);
      }
      comm.wait(recvs[j]);
    }
    if (next >= 0) {
      const Span c = chunk_of(all, per_chunk, j);
      sends.push_back(comm.isend(next, byte_at(buf, c.offset, es), c.count * es));
    }
  }
  comm.wait_all(sends);
}

double predict(const CostQuery& q) {
  return cost::chain_bcast(q, q.shape.ranks, q.bytes, q.flat());
}

}  // namespace

const Algorithm kBroadcastRing{
    .name = "ring",
    .wire_id = 8,
    .serves = {CollKind::broadcast},
    .run = run,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kBroadcastRing);

}  // namespace kolo::algo

// All-gather "ring": in step s rank r forwards block r-s to r+1 and receives block r-s-1 from
// r-1, straight into its place in recv (bandwidth-optimal). Each block moves as one message: a
// step forwards only what the previous one received whole, so cutting a block into chunks
// pipelined nothing, and chunks below the transport's single-copy size (shared memory copies
// a large message once, straight between the two ranks' buffers) went through its rings,
// copied twice (docs/PERFORMANCE.md: 2 ranks at 16 MiB, 2,231 -> 1,261 us on 16 cores).
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
  const int next = (r + 1) % P, prev = ring_mod(r - 1, P);
  TempList<Req> reqs(comm);
  reqs.reserve(2);
  for (int s = 0; s < P - 1; ++s) {
    reqs.push_back(comm.irecv(prev, block(ring_mod(r - s - 1, P)), n * es));
    reqs.push_back(comm.isend(next, block(ring_mod(r - s, P)), n * es));
    comm.wait_all(reqs);  // the block received now is forwarded in the next step
    reqs.clear();
  }
}

double predict(const CostQuery& q) {
  return cost::ring_pass(q, q.shape.ranks, q.bytes, q.flat(), false);
}

}  // namespace

const Algorithm kAllgatherRing{
    .name = "ring",
    .wire_id = 5,
    .serves = {CollKind::allgather},
    .run = run,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kAllgatherRing);

}  // namespace kolo::algo

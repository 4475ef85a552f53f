// All-gather "rd": recursive doubling, log2 P exchanges whose size doubles each time
// (latency-optimal for small blocks).
//
// With P not a power of two, p2 is the largest power of two below P and rem = P - p2: the
// even rank of each of the first rem pairs hands its block to its odd partner, sits out, and
// gets the whole result from it at the end. "New rank" i of the p2 that remain holds blocks
// [first(i), first(i+1)): two blocks for the first rem, one for the others, so any run of
// consecutive new ranks holds one contiguous range of blocks and each exchange is a single
// message.
#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t es = a.elem_size(), n = a.count, bytes = n * es;
  char* recv = static_cast<char*>(a.recv);
  auto block = [&](int b) { return byte_at(recv, static_cast<size_t>(b) * n, es); };
  copy_unless_same(block(r), a.send, bytes);
  if (P == 1 || n == 0) return;
  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  const int rem = P - p2;
  auto first_block = [&](int new_rank) { return new_rank < rem ? 2 * new_rank : new_rank + rem; };
  auto to_rank = [&](int new_rank) { return new_rank < rem ? 2 * new_rank + 1 : new_rank + rem; };

  if (r < 2 * rem && r % 2 == 0) {
    comm.wait(comm.isend(r + 1, block(r), bytes));
    comm.wait(comm.irecv(r + 1, recv, static_cast<size_t>(P) * bytes));
    return;
  }
  int new_rank = r - rem;
  if (r < 2 * rem) {
    comm.wait(comm.irecv(r - 1, block(r - 1), bytes));
    new_rank = r / 2;
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int partner = new_rank ^ mask;
    const int mine = new_rank & ~(mask - 1), theirs = partner & ~(mask - 1);
    const size_t mine_blocks = static_cast<size_t>(first_block(mine + mask) - first_block(mine));
    const size_t their_blocks = static_cast<size_t>(first_block(theirs + mask) - first_block(theirs));
    sendrecv(comm, to_rank(partner), block(first_block(mine)), mine_blocks * bytes, to_rank(partner),
             block(first_block(theirs)), their_blocks * bytes);
  }
  if (r < 2 * rem) comm.wait(comm.isend(r - 1, recv, static_cast<size_t>(P) * bytes));
}

double predict(const CostQuery& q) {
  return cost::rd_group(q, q.bytes, false);
}

}  // namespace

const Algorithm kAllgatherRd{
    .name = "rd",
    .wire_id = 7,
    .serves = {CollKind::allgather},
    .run = run,
    .cost = predict,
    .direct_max_ranks = 2,
};
KOLO_REGISTER_ALGORITHM(kAllgatherRd);

}  // namespace kolo::algo

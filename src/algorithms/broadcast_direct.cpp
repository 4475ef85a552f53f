// Broadcast "direct": the root sends the whole buffer straight to every other rank (one round;
// the root sends P-1 messages, every other rank receives one). For small buffers on one host:
// no rank waits for another to forward, which with more ranks than cores is a wait for that
// rank to be scheduled, and a small message costs the root one ring slot per peer rather than a
// round's latency. Large buffers belong to the tree and the ring: here the root sends all of them.
#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/temp_list.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank(), root = a.root;
  const size_t bytes = a.bytes();
  char* buf = broadcast_buffer(a, r);
  if (P == 1 || bytes == 0) return;
  if (r != root) {
    comm.wait(comm.irecv(root, buf, bytes));
    return;
  }
  // The peers in rank order after the root, as the other rooted "direct" algorithms send.
  TempList<Req> sends(comm);
  for (int i = 1; i < P; ++i) sends.push_back(comm.isend(add_mod(r, i, P), buf, bytes));
  comm.wait_all(sends);
}

}  // namespace

const Algorithm kBroadcastDirect{
    .name = "direct",
    .wire_id = 30,
    .serves = {CollKind::broadcast},
    .run = run,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kBroadcastDirect);

}  // namespace kolo::algo

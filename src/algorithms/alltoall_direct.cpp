// All-to-all "direct": every rank posts its P-1 receives and sends its P-1 blocks at once, one
// round of messages (pairwise takes P-1 rounds, each waiting for its exchange). Latency-optimal
// for small blocks on one host, where the direct path runs it without the engine (every receive
// is posted before the first wait, which that path needs; pairwise is allowed there at two
// ranks only).
//
// In place (recv == send), the incoming blocks land on outgoing ones that a transport may still
// be reading, so the outgoing blocks are copied to scratch first (the own block stays put).
#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/temp_list.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t block_bytes = a.bytes();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  auto at = [&](auto* base, int b) { return base + static_cast<size_t>(b) * block_bytes; };
  if (send == recv && P > 1 && block_bytes != 0)
    send = copy_outgoing_blocks(comm, send, P, r, block_bytes);
  else
    copy_unless_same(at(recv, r), at(send, r), block_bytes);
  TempList<Req> reqs(comm);
  reqs.reserve(2 * static_cast<size_t>(P));
  // Start with the neighbours so that not everybody talks to rank 0 first.
  for (int i = 1; i < P; ++i) {
    const int from = ring_mod(r - i, P);
    reqs.push_back(comm.irecv(from, at(recv, from), block_bytes));
  }
  for (int i = 1; i < P; ++i) {
    const int to = add_mod(r, i, P);
    reqs.push_back(comm.isend(to, at(send, to), block_bytes));
  }
  comm.wait_all(reqs);
}

}  // namespace

const Algorithm kAlltoallDirect{
    .name = "direct",
    .wire_id = 28,
    .serves = {CollKind::alltoall},
    .run = run,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kAlltoallDirect);

}  // namespace kolo::algo

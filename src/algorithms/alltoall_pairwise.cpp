// All-to-all "pairwise": in step i = 1..P-1 rank r sends block r+i to rank r+i and receives
// block r-i from rank r-i, so every rank has exactly one exchange partner in each direction
// per step; its own block is copied locally.
//
// In place (recv == send), a received block would overwrite an outgoing block not sent yet.
// With a power-of-two group the partners pair up (step i: rank r with r XOR i), so the block
// that comes in is the one going out to the same rank: it is received into a block of scratch
// and copied over its own outgoing block once both are done, P-1 block copies in all, as Open
// MPI's in-place all-to-all. Otherwise the outgoing blocks are first copied to scratch (the
// own block stays where it is).
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t block_bytes = a.bytes(), total = static_cast<size_t>(P) * block_bytes;
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  auto at = [&](auto* base, int b) { return base + static_cast<size_t>(b) * block_bytes; };
  if (send == recv && P > 1 && total != 0) {
    if ((P & (P - 1)) == 0) {
      char* in = static_cast<char*>(comm.scratch(block_bytes, 0));
      for (int i = 1; i < P; ++i) {
        const int partner = r ^ i;
        sendrecv(comm, partner, at(send, partner), block_bytes, partner, in, block_bytes);
        std::memcpy(at(recv, partner), in, block_bytes);
      }
      return;
    }
    send = copy_outgoing_blocks(comm, send, P, r, block_bytes);
  } else {
    copy_unless_same(at(recv, r), at(send, r), block_bytes);
  }
  for (int i = 1; i < P; ++i) {
    const int to = add_mod(r, i, P), from = ring_mod(r - i, P);
    sendrecv(comm, to, at(send, to), block_bytes, from, at(recv, from), block_bytes);
  }
}

}  // namespace

extern const Algorithm kAlltoallPairwise;
const Algorithm kAlltoallPairwise{"pairwise", CollKind::alltoall, nullptr, run, 2, true};  // one exchange at 2 ranks

}  // namespace kolo::algo

// All-to-all "pairwise": in step i = 1..P-1 rank r sends block r+i to rank r+i and receives
// block r-i from rank r-i, so every rank has exactly one exchange partner in each direction
// per step; its own block is copied locally.
//
// In-place (recv == send), a received block would overwrite an outgoing block not sent yet,
// so the input is first copied to scratch.
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
  if (send == recv && P > 1 && total != 0) {
    char* copy = static_cast<char*>(comm.scratch(total, 0));
    std::memcpy(copy, send, total);
    send = copy;
  }
  auto at = [&](auto* base, int b) { return base + static_cast<size_t>(b) * block_bytes; };
  copy_unless_same(at(recv, r), at(send, r), block_bytes);
  for (int i = 1; i < P; ++i) {
    const int to = (r + i) % P, from = ring_mod(r - i, P);
    sendrecv(comm, to, at(send, to), block_bytes, from, at(recv, from), block_bytes);
  }
}

}  // namespace

extern const Algorithm kAlltoallPairwise;
const Algorithm kAlltoallPairwise{"pairwise", CollKind::alltoall, nullptr, run};

}  // namespace kolo::algo

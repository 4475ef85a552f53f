// Barrier "dissemination": in round k every rank sends a zero-byte message to rank r + 2^k and
// waits for the one from r - 2^k. After ceil(log2 P) rounds every rank has (transitively)
// heard from every other, so nobody leaves before everybody has arrived.
#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const int P = comm.size(), r = comm.rank();
  char token_out = 0, token_in = 0;  // zero-byte messages still need an address
  for (int d = 1; d < P; d *= 2) sendrecv(comm, add_mod(r, d, P), &token_out, 0, ring_mod(r - d, P), &token_in, 0);
}

}  // namespace

extern const Algorithm kBarrierDissemination;
const Algorithm kBarrierDissemination{"dissemination", CollKind::barrier, nullptr, run, 2, true};  // one exchange at 2 ranks

}  // namespace kolo::algo

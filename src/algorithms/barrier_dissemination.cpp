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

const Algorithm kBarrierDissemination{
    .name = "dissemination",
    .wire_id = 18,
    .serves = {CollKind::barrier},
    .run = run,
    .direct_max_ranks = 2,
};
KOLO_REGISTER_ALGORITHM(kBarrierDissemination);

}  // namespace kolo::algo

// Barrier "central": every rank tells rank 0 that it has arrived, rank 0 waits for all of them
// and then releases every rank (2(P-1) zero-byte messages, two hops for everyone).
//
// Against dissemination (P log2 P messages, every rank waits on a chain of forwards) it keeps
// each rank's wait on one peer, rank 0: where ranks outnumber cores, a dissemination round that
// waited for a rank the scheduler had taken off its core cost a context switch per round, and
// the ranks left the barrier up to tens of microseconds apart (docs/PERFORMANCE.md, issue 12).
// Rank 0 leaves first, the moment the last rank has arrived (Open MPI's default barrier at
// small groups does the same). Which rank leaves first only moves who waits afterwards: a
// broadcast from rank 0 right after the barrier starts at once, a gather or reduce to rank 0
// waits longer; the choice (select.cpp) rests on the barrier's own latency, level with
// dissemination at 3-4 ranks and about half of it at 8 on 2 cores.
#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const int P = comm.size(), r = comm.rank();
  // Zero-byte messages still need an address.
  char token_out = 0;
  if (r != 0) {
    char token_in = 0;
    const Req release = comm.irecv(0, &token_in, 0);
    comm.wait(comm.isend(0, &token_out, 0));
    comm.wait(release);
    return;
  }
  // Rank 0: the arrivals' tokens land in one byte each (zero bytes: nothing is written).
  char tokens_in[1] = {0};
  TempList<Req> arrivals(comm);
  for (int i = 1; i < P; ++i) arrivals.push_back(comm.irecv(i, tokens_in, 0));
  comm.wait_all(arrivals);
  TempList<Req> releases(comm);
  for (int i = 1; i < P; ++i) releases.push_back(comm.isend(i, &token_out, 0));
  comm.wait_all(releases);
}

}  // namespace

const Algorithm kBarrierCentral{
    .name = "central",
    .wire_id = 29,
    .serves = {CollKind::barrier},
    .run = run,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kBarrierCentral);

}  // namespace kolo::algo

// All-reduce "oneshot": every rank sends its whole input to every other rank and reduces the P
// inputs itself, in rank order. One round of messages whatever P is (rd needs log2 P rounds,
// each waiting for the previous one), at the price of sending n bytes P-1 times per rank and
// reducing P-1 blocks: it wins only for small messages, and most where a round is expensive
// in itself, as when ranks outnumber cores and every dependent round can wait for a rank to be
// scheduled again.
//
// Every rank combines the same P blocks in the same order, so all ranks end with bit-identical
// results. The cost model has no formula for it; the threshold rule takes it on one host of 3-4
// ranks for small messages, where the direct path runs it in one round (select.cpp, measured
// with scripts/bench/algo-ab.sh).

#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/rank_order_reduce.hpp"
#include "algorithms/temp_list.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t bytes = a.bytes();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  if (P == 1 || a.count == 0) {
    result_is_own_input(comm);
    return;
  }
  char* arrived = static_cast<char*>(comm.scratch(static_cast<size_t>(P) * bytes, 0));
  TempList<const void*> blocks(comm, static_cast<size_t>(P));
  TempList<Req> arrivals(comm, static_cast<size_t>(P));
  for (int i = 1; i < P; ++i) {
    const int from = add_mod(r, P - i, P);
    char* dst = arrived + static_cast<size_t>(from) * bytes;
    blocks[static_cast<size_t>(from)] = dst;
    arrivals[static_cast<size_t>(from)] = comm.irecv(from, dst, bytes);
  }
  blocks[static_cast<size_t>(r)] = send;
  TempList<Req> sends(comm);
  for (int i = 1; i < P; ++i) sends.push_back(comm.isend(add_mod(r, i, P), send, bytes));
  // In place, the running result is written over my own input: every peer must have it first,
  // and it is saved if its turn comes after the result started to overwrite it.
  comm.wait_all(sends);
  void* spare = recv == send ? comm.scratch(bytes, 1) : nullptr;
  reduce_in_rank_order(comm, recv, blocks, arrivals, a.count, spare);
}

}  // namespace

const Algorithm kAllreduceOneshot{
    .name = "oneshot",
    .wire_id = 27,
    .serves = {CollKind::allreduce},
    .run = run,
    .direct_max_ranks = kAnyRanks,
};
KOLO_REGISTER_ALGORITHM(kAllreduceOneshot);

}  // namespace kolo::algo

// All-gather "direct": every rank sends its block to every other rank at once (one round of
// messages; latency-optimal for small blocks and few ranks).

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t es = a.elem_size(), n = a.count, bytes = n * es;
  char* recv = static_cast<char*>(a.recv);
  auto block = [&](int b) { return byte_at(recv, static_cast<size_t>(b) * n, es); };
  TempList<Req> reqs(comm);
  reqs.reserve(2 * static_cast<size_t>(P));
  // Start with the next rank so that not everybody talks to rank 0 first.
  for (int i = 1; i < P; ++i) {
    const int from = ring_mod(r - i, P);
    reqs.push_back(comm.irecv(from, block(from), bytes));
  }
  for (int i = 1; i < P; ++i) reqs.push_back(comm.isend(add_mod(r, i, P), a.send, bytes));
  copy_unless_same(block(r), a.send, bytes);
  comm.wait_all(reqs);
}

}  // namespace

extern const Algorithm kAllgatherDirect;
const Algorithm kAllgatherDirect{"direct", CollKind::allgather, nullptr, run, kAnyRanks, true};

}  // namespace kolo::algo

// All-reduce "rd": recursive doubling, latency-optimal for small messages (log2 P exchanges of
// the whole buffer).
//
// With P not a power of two, p2 is the largest power of two below P and rem = P - p2: the
// first 2*rem ranks pair up, the even one of each pair hands its input to the odd one and sits
// out, and gets the finished result back at the end. The p2 remaining ranks ("new ranks")
// exchange with new rank ^ mask for mask = 1, 2, 4, ...
//
// Both partners of an exchange compute the same combination, and every reduction is written
// as (lower rank's operand) op (higher rank's operand), so even NaN payloads come out the same
// and all ranks end with bit-identical results; each rank finalizes its own copy of the fully
// reduced buffer once.
#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t bytes = a.bytes();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  if (P == 1 || a.count == 0) {  // every rank knows count: nothing to exchange
    result_is_own_input(comm);
    return;
  }
  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  const int rem = P - p2;

  if (r < 2 * rem && r % 2 == 0) {
    // Folded out: the partner holds the sum of both inputs from here on.
    comm.wait(comm.isend(r + 1, send, bytes));  // the partner posted its receive first thing
    comm.wait(comm.irecv(r + 1, recv, bytes));
    return;
  }
  char* incoming = static_cast<char*>(comm.scratch(bytes, 0));
  copy_unless_same(recv, send, bytes);
  int new_rank;
  if (r < 2 * rem) {
    comm.wait(comm.irecv(r - 1, incoming, bytes));
    comm.reduce(recv, incoming, recv, a.count);  // (r-1) op r
    new_rank = r / 2;
  } else {
    new_rank = r - rem;
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int partner_new = new_rank ^ mask;
    const int partner = partner_new < rem ? 2 * partner_new + 1 : partner_new + rem;
    sendrecv(comm, partner, recv, bytes, partner, incoming, bytes);
    if (new_rank < partner_new) {
      comm.reduce(recv, recv, incoming, a.count);
    } else {
      comm.reduce(recv, incoming, recv, a.count);
    }
  }
  comm.finalize(recv, a.count);
  if (r < 2 * rem) comm.wait(comm.isend(r - 1, recv, bytes));
}

double predict(const CostQuery& q) {
  return cost::rd_group(q, q.bytes, true);
}

}  // namespace

const Algorithm kAllreduceRd{
    .name = "rd",
    .wire_id = 2,
    .serves = {CollKind::allreduce},
    .run = run,
    .cost = predict,
    .direct_max_ranks = 2,
};
KOLO_REGISTER_ALGORITHM(kAllreduceRd);

}  // namespace kolo::algo

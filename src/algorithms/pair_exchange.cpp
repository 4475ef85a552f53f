// "pair": every collective of a group of two as one exchange. At two ranks each collective below
// moves at most one message each way (the block the other rank needs), and a reduction combines
// rank 0's block with rank 1's, in that order on both ranks, so the results are bit-identical.
// The threshold rule takes it at two ranks up to KOLO_SMALL_BYTES, where one message beats a
// pipeline of chunks; on the engine's direct path it is a send into the pair and a take of the
// peer's message, nothing more.
#include <cstring>
#include <stdexcept>
#include <string>

#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {
namespace {

[[noreturn, gnu::cold, gnu::noinline]] void not_served(CollKind kind) {
  throw std::logic_error("kolo: the pair exchange has no " + std::string(coll_name(kind)));
}

// Rank 0's block op rank 1's into `dst`, then avg's division or premul_sum's factor.
void combine(Comm& comm, int r, void* dst, const void* mine, const void* theirs, size_t count) {
  comm.reduce(dst, r == 0 ? mine : theirs, r == 0 ? theirs : mine, count);
  comm.finalize(dst, count);
}

// One case per collective: what goes out, where the peer's message lands, and the local part
// once both ways are done (the result may overwrite what was sent).
void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int r = comm.rank(), q = 1 - r;
  const size_t n = a.bytes();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  const auto block = [n](auto* base, int b) { return base + static_cast<size_t>(b) * n; };
  switch (a.kind) {
    case CollKind::broadcast:  // one buffer, in either field
      if (r == a.root) {
        comm.exchange(q, send != nullptr ? send : recv, n, nullptr, 0);
        if (send != nullptr && recv != nullptr) copy_unless_same(recv, send, n);
      } else {
        comm.exchange(q, nullptr, 0, recv != nullptr ? recv : const_cast<char*>(send), n);
      }
      return;
    case CollKind::reduce:
      if (r == a.root) {
        char* in = static_cast<char*>(comm.scratch(n, 0));
        comm.exchange(q, nullptr, 0, in, n);
        combine(comm, r, recv, send, in, a.count);
      } else {
        comm.exchange(q, send, n, nullptr, 0);
      }
      return;
    case CollKind::allreduce: {
      char* in = static_cast<char*>(comm.scratch(n, 0));
      comm.exchange(q, send, n, in, n);
      combine(comm, r, recv, send, in, a.count);
      return;
    }
    case CollKind::reduce_scatter: {
      char* in = static_cast<char*>(comm.scratch(n, 0));
      comm.exchange(q, block(send, q), n, in, n);
      combine(comm, r, recv, block(send, r), in, a.count);
      return;
    }
    case CollKind::allgather:
      comm.exchange(q, send, n, block(recv, q), n);
      copy_unless_same(block(recv, r), send, n);
      return;
    case CollKind::gather:
      if (r == a.root) {
        comm.exchange(q, nullptr, 0, block(recv, q), n);
        copy_unless_same(block(recv, r), send, n);
      } else {
        comm.exchange(q, send, n, nullptr, 0);
      }
      return;
    case CollKind::scatter:
      if (r == a.root) {
        comm.exchange(q, block(send, q), n, nullptr, 0);
        copy_unless_same(recv, block(send, r), n);
      } else {
        comm.exchange(q, nullptr, 0, recv, n);
      }
      return;
    case CollKind::alltoall:
      if (send == recv) {  // the outgoing block and the incoming one are the same bytes
        char* in = static_cast<char*>(comm.scratch(n, 0));
        comm.exchange(q, block(send, q), n, in, n);
        std::memcpy(block(recv, q), in, n);
      } else {
        comm.exchange(q, block(send, q), n, block(recv, q), n);
        copy_unless_same(block(recv, r), block(send, r), n);
      }
      return;
    case CollKind::barrier: {
      char token = 0;  // zero-byte messages still need an address
      comm.exchange(q, &token, 0, &token, 0);
      return;
    }
    default:
      not_served(a.kind);
  }
}

// One message each way at once, and the reduction of one block where the collective reduces.
double predict(const CostQuery& q) {
  const bool reduces = q.kind == CollKind::allreduce || q.kind == CollKind::reduce || q.kind == CollKind::reduce_scatter;
  const double n = q.kind == CollKind::barrier ? 0 : q.bytes;
  return q.flat().time(n) + (reduces ? n * q.model.gamma : 0);
}

}  // namespace

const Algorithm kPairExchange{
    .name = "pair",
    .wire_id = 31,
    .serves = {CollKind::broadcast, CollKind::reduce, CollKind::allreduce, CollKind::reduce_scatter, CollKind::allgather,
               CollKind::gather, CollKind::scatter, CollKind::alltoall, CollKind::barrier},
    .run = run,
    .cost = predict,
    .min_ranks = 2,
    .max_ranks = 2,
    .direct_max_ranks = 2,
};
KOLO_REGISTER_ALGORITHM(kPairExchange);

}  // namespace kolo::algo

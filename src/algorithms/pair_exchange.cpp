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

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int r = comm.rank(), q = 1 - r;
  const size_t n = a.bytes();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  const auto block = [n](auto* base, int b) { return base + static_cast<size_t>(b) * n; };
  char token = 0;  // a barrier's zero-byte messages still need an address
  // What goes out (out != null) and where the peer's message lands (in != null).
  const char* out = nullptr;
  char* in = nullptr;
  size_t bytes = n;
  switch (a.kind) {
    case CollKind::broadcast:  // one buffer, in either field
      if (r == a.root)
        out = send != nullptr ? send : recv;
      else
        in = recv != nullptr ? recv : const_cast<char*>(send);
      break;
    case CollKind::reduce:
      if (r == a.root)
        in = static_cast<char*>(comm.scratch(n, 0));
      else
        out = send;
      break;
    case CollKind::allreduce:
      out = send;
      in = static_cast<char*>(comm.scratch(n, 0));
      break;
    case CollKind::reduce_scatter:
      out = block(send, q);
      in = static_cast<char*>(comm.scratch(n, 0));
      break;
    case CollKind::allgather:
      out = send;
      in = block(recv, q);
      break;
    case CollKind::gather:
      if (r == a.root)
        in = block(recv, q);
      else
        out = send;
      break;
    case CollKind::scatter:
      if (r == a.root)
        out = block(send, q);
      else
        in = recv;
      break;
    case CollKind::alltoall:
      out = block(send, q);
      // In place the outgoing block and the incoming one are the same bytes: land it in scratch.
      in = send == recv ? static_cast<char*>(comm.scratch(n, 0)) : block(recv, q);
      break;
    case CollKind::barrier:
      out = &token;
      in = &token;
      bytes = 0;
      break;
    default:
      throw std::logic_error("kolo: the pair exchange has no " + std::string(coll_name(a.kind)));
  }
  // Both ways done before the local part: the result may overwrite what was sent.
  comm.exchange(q, out, bytes, in, bytes);
  // Rank 0's block op rank 1's, then avg's division or premul_sum's factor.
  const auto combine = [&](void* dst, const void* mine) {
    comm.reduce(dst, r == 0 ? mine : in, r == 0 ? in : mine, a.count);
    comm.finalize(dst, a.count);
  };
  switch (a.kind) {
    case CollKind::broadcast:
      if (r == a.root && send != nullptr && recv != nullptr) copy_unless_same(recv, send, n);
      break;
    case CollKind::reduce:
      if (r == a.root) combine(recv, send);
      break;
    case CollKind::allreduce: combine(recv, send); break;
    case CollKind::reduce_scatter: combine(recv, block(send, r)); break;
    case CollKind::allgather: copy_unless_same(block(recv, r), send, n); break;
    case CollKind::gather:
      if (r == a.root) copy_unless_same(block(recv, r), send, n);
      break;
    case CollKind::scatter:
      if (r == a.root) copy_unless_same(recv, block(send, r), n);
      break;
    case CollKind::alltoall:
      if (send == recv) std::memcpy(block(recv, q), in, n);
      else copy_unless_same(block(recv, r), block(send, r), n);
      break;
    default: break;
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

// The direct path's shortcut for groups of two (Executor::run_direct). At two ranks every
// algorithm that declares Algorithm::two_rank_exchange moves at most one whole message each way
// per collective (the block the peer needs) and combines what arrived in rank order (rank 0's
// block op rank 1's): the broadcast and gather/scatter trees, direct reduce, gather, scatter,
// all-gather and reduce-scatter, rd and oneshot all-reduce, rd all-gather, pairwise all-to-all
// and the dissemination barrier. This runs that exchange straight on the pair (Pair::send_now,
// recv_now) with no Comm, requests or bookkeeping. The messages are the algorithm's own (its
// tag, its bytes), so the peer may run the algorithm the ordinary way.
#pragma once
#include <cstdint>

#include <cstring>

#include "algorithms/collective.hpp"
#include "engine/direct_spin.hpp"
#include "engine/scratch.hpp"
#include "kernels/cpu/reduce.hpp"
#include "transports/transport.hpp"

namespace kolo::engine {

struct TwoRankOutcome {
  bool done;      // completed: the result is in place
  uint32_t sent;  // otherwise: messages already sent (0 or 1), which the engine's run skips
};

// `a` as validated; `rank` 0 or 1; `peer` the pair to the other rank; `tag` the collective's;
// `already_sent` what an earlier attempt sent (0 or 1), not sent again.
// Local copies and the reduction happen only once the message arrived, so a collective handed
// over (not done) has changed nothing but what it sent.
// Inline (its one caller is Executor::run_two_rank_direct): a frame and seven arguments less on
// every two-rank collective.
namespace two_rank_detail {

inline void copy_unless_same(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
}

// dst = rank 0's block op rank 1's, then avg's division or premul_sum's factor: what every
// algorithm that declares the two-rank exchange computes, bit for bit, on both ranks.
inline void combine(const algo::CollArgs& a, int rank, void* dst, const void* mine, const void* theirs) {
  const void* first = rank == 0 ? mine : theirs;
  const void* second = rank == 0 ? theirs : mine;
  kernels::reduce(a.dtype, a.op.kind, dst, first, second, a.count);
  kernels::finalize(a.dtype, a.op, dst, a.count, 2);
}

}  // namespace two_rank_detail

[[gnu::always_inline]] inline TwoRankOutcome run_two_rank(const algo::CollArgs& a, int rank, transport::Pair& peer, const transport::Tag& tag,
                                                       Scratch& scratch, DirectSpin& spin, uint32_t already_sent) {
  using algo::CollKind;
  using transport::Pair;
  using two_rank_detail::combine;
  using two_rank_detail::copy_unless_same;
  const int q = 1 - rank;
  const size_t n = a.bytes();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  char token = 0;  // the barrier's zero-byte messages still need an address
  // What goes out (out != null), and where the message that comes in lands (in != null).
  const char* out = nullptr;
  char* in = nullptr;
  switch (a.kind) {
    case CollKind::broadcast:
      if (rank == a.root)
        out = send != nullptr ? send : recv;
      else
        in = recv != nullptr ? recv : const_cast<char*>(send);
      break;
    case CollKind::reduce:
      if (rank == a.root)
        in = static_cast<char*>(scratch.get(n, 0));
      else
        out = send;
      break;
    case CollKind::allreduce:
      out = send;
      in = static_cast<char*>(scratch.get(n, 0));
      break;
    case CollKind::reduce_scatter:
      out = send + static_cast<size_t>(q) * n;
      in = static_cast<char*>(scratch.get(n, 0));
      break;
    case CollKind::allgather:
      out = send;
      in = recv + static_cast<size_t>(q) * n;
      break;
    case CollKind::gather:
      if (rank == a.root)
        in = recv + static_cast<size_t>(q) * n;
      else
        out = send;
      break;
    case CollKind::scatter:
      if (rank == a.root)
        out = send + static_cast<size_t>(q) * n;
      else
        in = recv;
      break;
    case CollKind::alltoall:
      // In place the block for the peer leaves (copied into the ring) before its block lands
      // on the same bytes.
      out = send + static_cast<size_t>(q) * n;
      in = recv + static_cast<size_t>(q) * n;
      break;
    case CollKind::barrier:
      out = &token;
      in = &token;
      break;
    default:
      return {false, 0};
  }
  const size_t bytes = a.kind == CollKind::barrier ? 0 : n;
  uint32_t sent = 0;
  if (out != nullptr && already_sent == 0) {
    for (;;) {
      const Pair::Now now = peer.send_now(out, bytes, tag);
      if (now == Pair::Now::sent) break;
      if (now == Pair::Now::declined || !spin.again()) return {false, 0};
    }
  }
  if (out != nullptr) sent = 1;
  if (in != nullptr) {
    while (!peer.recv_now(in, bytes, tag))
      if (!spin.again()) return {false, sent};
  }
  // Arrived: the local part.
  switch (a.kind) {
    case CollKind::broadcast:
      if (rank == a.root && send != nullptr && recv != nullptr) copy_unless_same(recv, send, n);
      break;
    case CollKind::reduce:
      if (rank == a.root) combine(a, rank, recv, send, in);
      break;
    case CollKind::allreduce:
      combine(a, rank, recv, send, in);
      break;
    case CollKind::reduce_scatter:
      combine(a, rank, recv, send + static_cast<size_t>(rank) * n, in);
      break;
    case CollKind::allgather:
      copy_unless_same(recv + static_cast<size_t>(rank) * n, send, n);
      break;
    case CollKind::gather:
      if (rank == a.root) copy_unless_same(recv + static_cast<size_t>(rank) * n, send, n);
      break;
    case CollKind::scatter:
      if (rank == a.root) copy_unless_same(recv, send + static_cast<size_t>(rank) * n, n);
      break;
    case CollKind::alltoall:
      copy_unless_same(recv + static_cast<size_t>(rank) * n, send + static_cast<size_t>(rank) * n, n);
      break;
    default:
      break;
  }
  return {true, sent};
}

}  // namespace kolo::engine

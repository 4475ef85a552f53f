// All-reduce "twoshot": a direct reduce-scatter followed by a direct all-gather. Every rank
// sends block i of its input straight to rank i, reduces the P blocks of its own slice in rank
// order, then sends the finished slice straight to every rank. Two rounds of messages whatever
// P is (ring needs 2(P-1)), each byte still sent 2(P-1)/P times per rank: it wins where the
// transport moves many messages at once as cheaply as one, as shared memory with cross-memory
// attach does (each receiver copies from its peers' buffers in parallel).
//
// Every rank reduces its slice in the same rank order and sends the same bytes to everyone, so
// all ranks end with bit-identical results.

#include <algorithm>

#include "algorithms/algorithm.hpp"
#include "algorithms/temp_list.hpp"
#include "algorithms/partition.hpp"
#include "algorithms/rank_order_reduce.hpp"

namespace kolo::algo {
namespace {

// The reduction's tile (at most KOLO_CHUNK_BYTES): the running result and the P blocks' pieces
// of one tile stay in a core's L2 (2 MiB on the development VM's Xeon).
constexpr size_t kTileBytes = 64 << 10;

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t es = a.elem_size();
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  if (P == 1 || a.count == 0) {
    result_is_own_input(comm);
    return;
  }
  const Span mine = block_of(a.count, P, r);
  const size_t mine_bytes = mine.count * es;

  // 1. Reduce-scatter: block `to` of my input goes to rank `to`; my slice comes from everyone.
  char* arrived = static_cast<char*>(comm.scratch(static_cast<size_t>(P) * mine_bytes, 0));
  TempList<const void*> blocks(comm, static_cast<size_t>(P));
  TempList<Req> arrivals(comm, static_cast<size_t>(P));
  for (int i = 1; i < P; ++i) {
    const int from = add_mod(r, i, P);
    char* dst = arrived + static_cast<size_t>(from) * mine_bytes;
    blocks[static_cast<size_t>(from)] = dst;
    arrivals[static_cast<size_t>(from)] = comm.irecv(from, dst, mine_bytes);
  }
  blocks[static_cast<size_t>(r)] = byte_at(send, mine.offset, es);
  TempList<Req> sends(comm);
  for (int i = 1; i < P; ++i) {
    const int to = add_mod(r, i, P);
    const Span b = block_of(a.count, P, to);
    sends.push_back(comm.isend(to, byte_at(send, b.offset, es), b.count * es));
  }
  char* out = byte_at(recv, mine.offset, es);
  // Every block first, then one pass over my slice in cache-sized tiles: waiting is no loss
  // here, since a large block arrives by the receiver's own copying (shared memory's single
  // copy), and the slice's running result then goes to memory once instead of P-1 times.
  comm.wait_all(arrivals);
  const size_t tile = std::max<size_t>(1, std::min(comm.chunk_bytes(), kTileBytes) / es);
  // In place, my slice of the output is my own input block: each tile of it is saved first if
  // the running result would overwrite it before its turn.
  void* spare = out == blocks[static_cast<size_t>(r)] ? comm.scratch(tile * es, 1) : nullptr;
  reduce_arrived_in_tiles(comm, out, blocks, mine.count, tile, spare);
  // The peers have read their blocks of my input: only now may the all-gather overwrite them
  // (in place, input and output are the same buffer).
  comm.wait_all(sends);

  // 2. All-gather: my finished slice to everyone; theirs straight into place.
  TempList<Req> reqs(comm);
  for (int i = 1; i < P; ++i) {
    const int from = add_mod(r, P - i, P);
    const Span b = block_of(a.count, P, from);
    reqs.push_back(comm.irecv(from, byte_at(recv, b.offset, es), b.count * es));
  }
  for (int i = 1; i < P; ++i) reqs.push_back(comm.isend(add_mod(r, i, P), out, mine_bytes));
  comm.wait_all(reqs);
}

double predict(const CostQuery& q) {
  const int P = q.shape.ranks;
  if (P <= 1) return 0;
  const double seg = q.bytes / P;
  return 2 * cost::all_to_all_round(q, seg) + (P - 1) * seg * q.model.gamma;
}

}  // namespace

const Algorithm kAllreduceTwoshot{
    .name = "twoshot",
    .wire_id = 21,
    .serves = {CollKind::allreduce},
    .run = run,
    .cost = predict,
};
KOLO_REGISTER_ALGORITHM(kAllreduceTwoshot);

}  // namespace kolo::algo

// All-to-all-v "pairwise": as alltoall's pairwise exchange (step i: send to r+i, receive from
// r-i), with per-peer counts and displacements in elements. Should the send and receive
// extents overlap, the input is first copied to scratch so no outgoing data is overwritten
// before it leaves.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"
#include "kolo/error.hpp"

namespace kolo::algo {
namespace {

size_t extent(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  size_t end = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] != 0) end = std::max(end, displs[i] + counts[i]);
  return end;
}

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  const VarCounts& v = *a.v;
  const int P = comm.size(), r = comm.rank();
  const size_t es = a.elem_size();
  const auto self = static_cast<size_t>(r);
  if (v.send_counts[self] != v.recv_counts[self])
    throw InvalidArgument("kolo: alltoallv: rank " + std::to_string(r) + " sends itself " +
                          std::to_string(v.send_counts[self]) + " elements but expects " +
                          std::to_string(v.recv_counts[self]));
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  const size_t send_bytes = extent(v.send_counts, v.send_displs) * es;
  const size_t recv_bytes = extent(v.recv_counts, v.recv_displs) * es;
  const auto s0 = reinterpret_cast<uintptr_t>(send), r0 = reinterpret_cast<uintptr_t>(recv);
  if (send_bytes != 0 && recv_bytes != 0 && s0 < r0 + recv_bytes && r0 < s0 + send_bytes) {
    char* copy = static_cast<char*>(comm.scratch(send_bytes, 0));
    std::memcpy(copy, send, send_bytes);
    send = copy;
  }
  auto out = [&](int peer) { return byte_at(send, v.send_displs[static_cast<size_t>(peer)], es); };
  auto in = [&](int peer) { return byte_at(recv, v.recv_displs[static_cast<size_t>(peer)], es); };
  copy_unless_same(in(r), out(r), v.recv_counts[self] * es);
  for (int i = 1; i < P; ++i) {
    const int to = add_mod(r, i, P), from = ring_mod(r - i, P);
    sendrecv(comm, to, out(to), v.send_counts[static_cast<size_t>(to)] * es, from, in(from),
             v.recv_counts[static_cast<size_t>(from)] * es);
  }
}

}  // namespace

const Algorithm kAlltoallvPairwise{.name = "pairwise", .wire_id = 17, .serves = {CollKind::alltoallv}, .run = run};
KOLO_REGISTER_ALGORITHM(kAlltoallvPairwise);

}  // namespace kolo::algo

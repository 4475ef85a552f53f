// The collectives the peer benchmarks know: how nccl-tests sizes each one's buffers for a byte
// size, its bus bandwidth factor, and where its data sits out-of-place and in-place. Mirrors
// bench/perf/collectives.hpp so that a row of kolo-perf and a row of a peer measure the same thing.
#pragma once
#include <cstddef>
#include <string>

namespace kolo::peers {

enum class CollId { allreduce, broadcast, reduce, allgather, reducescatter, alltoall };

// Element counts for one row (nccl-tests' getCollByteCount).
struct Shape {
  size_t send_count = 0;   // elements in each rank's send buffer
  size_t recv_count = 0;   // elements in each rank's receive buffer
  size_t param_count = 0;  // the per-rank count, NCCL convention
};

struct CollectiveSpec {
  CollId id;
  const char* name;
  bool reduces;  // takes an operator ("redop" column)
  bool rooted;   // has a root ("root" column; -1 otherwise)
  Shape (*shape)(size_t count, int nranks);
  // busbw = algbw * factor, algbw = max(send, recv) bytes / time (nccl-tests' convention).
  double (*busbw_factor)(int nranks);
};

// Throws UsageError for a name that is not one of the six.
const CollectiveSpec& find_collective(const std::string& name);

// Where one rank's data lives for one run.
struct Placement {
  void* send = nullptr;  // what the collective reads (broadcast: the root's buffer)
  size_t send_count = 0;
  void* recv = nullptr;  // what it writes (broadcast: the same buffer)
  size_t recv_count = 0;
};

// nccl-tests' layout: out-of-place reads send_base and writes recv_base; in place both live in
// recv_base, allgather's input at this rank's block of the result and reducescatter's result at
// this rank's block of the input. Both bases hold max(send, recv) elements.
Placement nccl_placement(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int rank, int root,
                         bool in_place, void* send_base, void* recv_base);

}  // namespace kolo::peers

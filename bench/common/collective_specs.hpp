// The collectives every benchmark program knows: how nccl-tests sizes each one's buffers for a
// byte size, and nccl-tests' bus bandwidth factor (its doc/PERFORMANCE.md). kolo-perf and the
// peers share this table, so a row of one and a row of another measure the same thing.
#pragma once
#include <cstddef>
#include <string>

namespace kolo::bench {

enum class CollId { allreduce, broadcast, reduce, allgather, reducescatter, alltoall, gather, scatter, sendrecv };

// Element counts for one row of the table (nccl-tests' getCollByteCount).
struct Shape {
  size_t send_count = 0;   // elements in each rank's send buffer
  size_t recv_count = 0;   // elements in each rank's receive buffer
  size_t param_count = 0;  // the count passed to the collective: per rank, NCCL convention
};

struct CollectiveSpec {
  CollId id;
  const char* name;  // as typed on the command line
  bool reduces;      // takes a reduction operator (printed in the "redop" column)
  bool rooted;       // has a root (printed in the "root" column; -1 otherwise)
  // Buffer sizes for `count` = size / element size on `nranks` ranks. Sizes that do not divide
  // by nranks round down to a multiple, so a small size can leave a count of 0 (still run).
  Shape (*shape)(size_t count, int nranks);
  // busbw = algbw * factor, with algbw = max(send, recv) bytes / time: what each rank's link
  // carries relative to algbw in the bandwidth-optimal algorithm.
  double (*busbw_factor)(int nranks);
};

// The canonical name for nccl-tests' binary names too ("all_reduce" -> "allreduce"); other
// names are returned unchanged.
std::string canonical_collective(const std::string& name);
// Throws UsageError for an unknown name (nccl-tests' names accepted).
const CollectiveSpec& find_collective(const std::string& name);
// "allreduce, broadcast, ..." for usage and error messages.
std::string collective_names();

}  // namespace kolo::bench

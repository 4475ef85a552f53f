// What kolo-perf knows about each collective: its name, how nccl-tests sizes its buffers for a
// given byte size, and nccl-tests' bus bandwidth factor.
#pragma once
#include <cstddef>
#include <string>

namespace kolo::perf {

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
  // Buffer sizes for `count` = size / element size on `nranks` ranks.
  Shape (*shape)(size_t count, int nranks);
  // busbw = algbw * factor, with algbw = max(send, recv) bytes / time (nccl-tests' convention).
  double (*busbw_factor)(int nranks);
};

// Throws UsageError (options.hpp) for an unknown name.
const CollectiveSpec& find_collective(const std::string& name);
// "allreduce, broadcast, ..." for usage and error messages.
std::string collective_names();

}  // namespace kolo::perf

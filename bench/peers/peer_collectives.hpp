// Where a peer's data sits out-of-place and in-place. The collectives themselves (shapes, busbw
// factors) come from bench/common, shared with kolo-perf, so a row of kolo-perf and a row of a
// peer measure the same thing.
#pragma once
#include <cstddef>
#include <string>

#include "collective_specs.hpp"

namespace kolo::peers {

using bench::CollectiveSpec;
using bench::CollId;
using bench::find_collective;
using bench::Shape;

// Where one rank's data lives for one run.
struct Placement {
  void* send = nullptr;  // what the collective reads (broadcast: the root's buffer)
  size_t send_count = 0;
  void* recv = nullptr;  // what it writes (broadcast: the same buffer)
  size_t recv_count = 0;
};

// nccl-tests' layout: out-of-place reads send_base and writes recv_base; in place both live in
// recv_base, (all)gather's input at this rank's block of the result and reducescatter's and
// scatter's result at this rank's block of the input. Both bases hold max(send, recv) elements.
Placement nccl_placement(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int rank, int root,
                         bool in_place, void* send_base, void* recv_base);

}  // namespace kolo::peers

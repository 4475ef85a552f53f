// Where one rank's send and receive data live for one run, out-of-place or in-place, following
// the buffer conventions of include/kolo/process_group.hpp.
#pragma once
#include <cstddef>

#include "collectives.hpp"
#include "kolo/buffer.hpp"

namespace kolo::perf {

struct Placement {
  Buffer send;  // what the collective reads (broadcast: its single buffer)
  Buffer recv;  // what it writes (broadcast: the same buffer)
};

// send_base and recv_base each hold at least max(shape.send_count, shape.recv_count) elements.
// In-place runs put both in recv_base at the offsets kolo defines; out-of-place broadcast reads
// the root's send_base and writes recv_base on the other ranks.
Placement place(const CollectiveSpec& spec, const Shape& shape, DataType dtype, int rank, int root,
                bool in_place, void* send_base, void* recv_base);

}  // namespace kolo::perf

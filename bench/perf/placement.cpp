#include "placement.hpp"

namespace kolo::perf {

Placement place(const CollectiveSpec& spec, const Shape& shape, DataType dtype, int rank, int root,
                bool in_place, void* send_base, void* recv_base) {
  auto* recv_bytes = static_cast<unsigned char*>(recv_base);
  const size_t elem = dtype_size(dtype);
  const size_t own_block = static_cast<size_t>(rank) * shape.param_count * elem;
  Placement p;
  p.recv = Buffer(recv_base, shape.recv_count, dtype);
  p.send = Buffer(in_place ? recv_base : send_base, shape.send_count, dtype);
  switch (spec.id) {
    case CollId::broadcast: {
      void* buffer = (!in_place && rank == root) ? send_base : recv_base;
      p.send = p.recv = Buffer(buffer, shape.param_count, dtype);
      break;
    }
    case CollId::allgather:
    case CollId::gather:
      // In place, this rank's contribution already sits in its block of the result.
      if (in_place) p.send = Buffer(recv_bytes + own_block, shape.send_count, dtype);
      break;
    case CollId::reducescatter:
    case CollId::scatter:
      // In place, the result is this rank's block of the input.
      if (in_place) p.recv = Buffer(recv_bytes + own_block, shape.recv_count, dtype);
      break;
    default:
      break;
  }
  return p;
}

}  // namespace kolo::perf

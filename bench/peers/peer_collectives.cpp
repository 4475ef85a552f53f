#include "peer_collectives.hpp"

namespace kolo::peers {

Placement nccl_placement(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int rank, int root,
                         bool in_place, void* send_base, void* recv_base) {
  auto* recv_bytes = static_cast<unsigned char*>(recv_base);
  const size_t own_block = static_cast<size_t>(rank) * shape.param_count * element_bytes;
  Placement p{in_place ? recv_base : send_base, shape.send_count, recv_base, shape.recv_count};
  switch (spec.id) {
    case CollId::broadcast: {
      void* buffer = (!in_place && rank == root) ? send_base : recv_base;
      p = Placement{buffer, shape.param_count, buffer, shape.param_count};
      break;
    }
    case CollId::allgather:
    case CollId::gather:  // in place: this rank's block already sits in the result
      if (in_place) p.send = recv_bytes + own_block;
      break;
    case CollId::reducescatter:
    case CollId::scatter:  // in place: this rank's result is its block of the input
      if (in_place) p.recv = recv_bytes + own_block;
      break;
    default:
      break;
  }
  return p;
}

}  // namespace kolo::peers

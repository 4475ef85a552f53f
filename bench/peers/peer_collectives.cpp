#include "peer_collectives.hpp"

#include "peer_options.hpp"

namespace kolo::peers {
namespace {

// Sizes that do not divide by nranks round down to a multiple (a count of 0 still runs).
Shape same_count(size_t count, int) { return {count, count, count}; }

Shape gather_like(size_t count, int nranks) {
  const size_t per_rank = count / static_cast<size_t>(nranks);
  return {per_rank, per_rank * static_cast<size_t>(nranks), per_rank};
}

Shape scatter_like(size_t count, int nranks) {
  const size_t per_rank = count / static_cast<size_t>(nranks);
  return {per_rank * static_cast<size_t>(nranks), per_rank, per_rank};
}

Shape all_to_all(size_t count, int nranks) {
  const size_t per_rank = count / static_cast<size_t>(nranks);
  return {per_rank * static_cast<size_t>(nranks), per_rank * static_cast<size_t>(nranks), per_rank};
}

// nccl-tests' bus bandwidth factors (its doc/PERFORMANCE.md).
double allreduce_factor(int n) { return n > 0 ? 2.0 * (n - 1) / n : 0.0; }
double n_minus_1_over_n(int n) { return n > 0 ? static_cast<double>(n - 1) / n : 0.0; }
double one(int) { return 1.0; }

constexpr CollectiveSpec kCollectives[] = {
    {CollId::allreduce, "allreduce", true, false, same_count, allreduce_factor},
    {CollId::broadcast, "broadcast", false, true, same_count, one},
    {CollId::reduce, "reduce", true, true, same_count, one},
    {CollId::allgather, "allgather", false, false, gather_like, n_minus_1_over_n},
    {CollId::reducescatter, "reducescatter", true, false, scatter_like, n_minus_1_over_n},
    {CollId::alltoall, "alltoall", false, false, all_to_all, n_minus_1_over_n},
};

}  // namespace

const CollectiveSpec& find_collective(const std::string& name) {
  for (const CollectiveSpec& spec : kCollectives) {
    if (name == spec.name) return spec;
  }
  throw UsageError("unknown collective '" + name + "'");
}

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
      if (in_place) p.send = recv_bytes + own_block;
      break;
    case CollId::reducescatter:
      if (in_place) p.recv = recv_bytes + own_block;
      break;
    default:
      break;
  }
  return p;
}

}  // namespace kolo::peers

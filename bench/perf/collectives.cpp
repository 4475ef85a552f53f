#include "collectives.hpp"

#include "options.hpp"

namespace kolo::perf {
namespace {

// Shapes, as in nccl-tests: sizes that do not divide by nranks are rounded down to a multiple,
// so a small size can leave a count of 0 (still run: zero counts must work).
Shape same_count(size_t count, int) { return {count, count, count}; }

Shape gather_like(size_t count, int nranks) {  // allgather, gather: recv holds every rank's block
  const size_t per_rank = count / static_cast<size_t>(nranks);
  return {per_rank, per_rank * static_cast<size_t>(nranks), per_rank};
}

Shape scatter_like(size_t count, int nranks) {  // reducescatter, scatter: send holds every block
  const size_t per_rank = count / static_cast<size_t>(nranks);
  return {per_rank * static_cast<size_t>(nranks), per_rank, per_rank};
}

Shape all_to_all(size_t count, int nranks) {
  const size_t per_rank = count / static_cast<size_t>(nranks);
  return {per_rank * static_cast<size_t>(nranks), per_rank * static_cast<size_t>(nranks), per_rank};
}

// Bus bandwidth factors of nccl-tests (doc/PERFORMANCE.md there): what each rank's link carries
// relative to algbw in the bandwidth-optimal algorithm.
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
    {CollId::gather, "gather", false, true, gather_like, n_minus_1_over_n},
    {CollId::scatter, "scatter", false, true, scatter_like, n_minus_1_over_n},
    {CollId::sendrecv, "sendrecv", false, false, same_count, one},
};

}  // namespace

const CollectiveSpec& find_collective(const std::string& name) {
  for (const CollectiveSpec& spec : kCollectives) {
    if (name == spec.name) return spec;
  }
  // nccl-tests' binary names, so scripts can pass them through.
  if (name == "all_reduce") return kCollectives[0];
  if (name == "all_gather") return kCollectives[3];
  if (name == "reduce_scatter") return kCollectives[4];
  throw UsageError("unknown collective '" + name + "' (expected " + collective_names() + ")");
}

std::string collective_names() {
  std::string names;
  for (const CollectiveSpec& spec : kCollectives) {
    if (!names.empty()) names += ", ";
    names += spec.name;
  }
  return names;
}

}  // namespace kolo::perf

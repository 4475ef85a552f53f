#include "collective_specs.hpp"

#include "usage_error.hpp"

namespace kolo::bench {
namespace {

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

std::string canonical_collective(const std::string& name) {
  if (name == "all_reduce") return "allreduce";
  if (name == "all_gather") return "allgather";
  if (name == "reduce_scatter") return "reducescatter";
  return name;
}

const CollectiveSpec& find_collective(const std::string& name) {
  const std::string canonical = canonical_collective(name);
  for (const CollectiveSpec& spec : kCollectives) {
    if (canonical == spec.name) return spec;
  }
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

}  // namespace kolo::bench

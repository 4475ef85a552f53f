#include "peer_check.hpp"

#include <cstdio>
#include <cstring>

namespace kolo::peers {
namespace {

// Any pattern works as long as a correct run overwrites it; 0xA5 bytes are no small integer in
// the floating types, so a stale float can never pass.
constexpr unsigned char kPoison = 0xA5;

int64_t expected_at(const CheckContext& c, const ValuePlan& plan, size_t i) {
  const size_t block = c.shape.param_count;
  switch (c.spec->id) {
    case CollId::allreduce:
    case CollId::reduce:
      return plan.reduced(i);
    case CollId::broadcast:
      return plan.input(c.root, i);
    case CollId::allgather:
    case CollId::gather:
      return plan.input(static_cast<int>(i / block), i % block);
    case CollId::scatter:
      return plan.input(c.root, static_cast<size_t>(c.rank) * block + i);
    case CollId::sendrecv:  // a ring: every rank receives from the previous one
      return plan.input((c.rank + c.nranks - 1) % c.nranks, i);
    case CollId::reducescatter:
      return plan.reduced(static_cast<size_t>(c.rank) * block + i);
    case CollId::alltoall:
      return plan.input(static_cast<int>(i / block), static_cast<size_t>(c.rank) * block + i % block);
    default:
      break;
  }
  return 0;
}

// Broadcast's and scatter's only input is the root's buffer; everyone else just receives.
bool has_input(const CheckContext& c) {
  const bool root_input = c.spec->id == CollId::broadcast || c.spec->id == CollId::scatter;
  return !root_input || c.rank == c.root;
}

}  // namespace

void fill_inputs(const CheckContext& c, const Placement& where, const ValuePlan& plan) {
  const size_t elem = element_size(c.type);
  if (where.recv != nullptr && where.recv_count > 0) std::memset(where.recv, kPoison, where.recv_count * elem);
  if (!has_input(c)) return;
  for (size_t i = 0; i < where.send_count; ++i) store_value(c.type, where.send, i, plan.input(c.rank, i));
}

void fill_for_timing(const CheckContext& c, const Placement& where) {
  if (!has_input(c)) return;
  for (size_t i = 0; i < where.send_count; ++i)
    store_value(c.type, where.send, i, static_cast<int64_t>((i * 7 + static_cast<size_t>(c.rank)) % 16));
}

int64_t count_wrong(const CheckContext& c, const Placement& where, const ValuePlan& plan, const char* program) {
  const bool root_only = c.spec->id == CollId::reduce || c.spec->id == CollId::gather;
  if (root_only && c.rank != c.root) return 0;
  int64_t wrong = 0;
  for (size_t i = 0; i < where.recv_count; ++i) {
    const int64_t expected = expected_at(c, plan, i);
    if (holds_value(c.type, where.recv, i, expected)) continue;
    if (wrong < 5) {
      std::fprintf(stderr, "%s: rank %d: %s %s %s: element %zu is %s, expected %lld\n", program, c.rank, c.spec->name,
                   type_name(c.type), c.in_place ? "in-place" : "out-of-place", i,
                   element_text(c.type, where.recv, i).c_str(), static_cast<long long>(expected));
    }
    ++wrong;
  }
  return wrong;
}

}  // namespace kolo::peers

#include "check.hpp"

#include <cstdio>
#include <cstring>

namespace kolo::bench {
namespace {

// Any pattern works as poison as long as a correct run overwrites it; 0xA5 bytes are no integer
// in any floating type, so a stale float can never pass.
constexpr unsigned char kPoison = 0xA5;

// What rank c.rank's output element i should be.
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
    case CollId::reducescatter:
      return plan.reduced(static_cast<size_t>(c.rank) * block + i);
    case CollId::scatter:
      return plan.input(c.root, static_cast<size_t>(c.rank) * block + i);
    case CollId::alltoall:
      return plan.input(static_cast<int>(i / block), static_cast<size_t>(c.rank) * block + i % block);
    case CollId::sendrecv:  // a ring: every rank receives from the previous one
      return plan.input((c.rank + c.nranks - 1) % c.nranks, i);
  }
  return 0;
}

// Broadcast's and scatter's only input is the root's buffer; everyone else just receives.
bool has_input(const CheckContext& c) {
  const bool root_input = c.spec->id == CollId::broadcast || c.spec->id == CollId::scatter;
  return !root_input || c.rank == c.root;
}

// Reduce's and gather's only output is the root's.
bool has_output(const CheckContext& c) {
  const bool root_output = c.spec->id == CollId::reduce || c.spec->id == CollId::gather;
  return !root_output || c.rank == c.root;
}

}  // namespace

void fill_inputs(const CheckContext& c, const Placement& where, const ValuePlan& plan) {
  if (where.recv != nullptr && where.recv_count > 0)
    std::memset(where.recv, kPoison, where.recv_count * element_size(c.type));
  if (!has_input(c)) return;
  // In place the input may overlap the (just poisoned) output: written second, it wins.
  for (size_t i = 0; i < where.send_count; ++i) store_value(c.type, where.send, i, plan.input(c.rank, i));
}

void fill_for_timing(const CheckContext& c, const Placement& where) {
  if (!has_input(c)) return;
  for (size_t i = 0; i < where.send_count; ++i)
    store_value(c.type, where.send, i, static_cast<int64_t>((i * 7 + static_cast<size_t>(c.rank)) % 16));
}

void spoil_first_output(const CheckContext& c, const Placement& where) {
  if (!has_output(c) || where.recv == nullptr || where.recv_count == 0) return;
  auto* bytes = static_cast<unsigned char*>(where.recv);
  for (size_t i = 0; i < element_size(c.type); ++i) bytes[i] = static_cast<unsigned char>(~bytes[i]);
}

int64_t count_wrong(const CheckContext& c, const Placement& where, const ValuePlan& plan, const char* program) {
  if (!has_output(c)) return 0;
  int64_t wrong = 0;
  for (size_t i = 0; i < where.recv_count; ++i) {
    const int64_t expected = expected_at(c, plan, i);
    if (holds_value(c.type, where.recv, i, expected)) continue;
    if (wrong < 5) {
      std::fprintf(stderr, "%s: rank %d: %s %s %s: element %zu is %s, expected %lld\n", program, c.rank, c.spec->name,
                   element_name(c.type), c.in_place ? "in-place" : "out-of-place", i,
                   element_text(c.type, where.recv, i).c_str(), static_cast<long long>(expected));
    }
    ++wrong;
  }
  return wrong;
}

}  // namespace kolo::bench

#include "check.hpp"

#include <cstdio>
#include <cstring>


namespace kolo::perf {
namespace {

// Any pattern works as poison as long as it is rewritten by a correct run; 0xA5 bytes are no
// integer in any floating type, so a stale float can never pass.
constexpr unsigned char kPoison = 0xA5;

void poison(const Buffer& b) {
  if (b.ptr != nullptr && b.count > 0) std::memset(b.ptr, kPoison, b.bytes());
}

void fill(const Buffer& b, const ValuePlan& plan, int rank, size_t first_index = 0) {
  for (size_t i = 0; i < b.count; ++i) store_value(b.dtype, b.ptr, i, plan.input(rank, first_index + i));
}

// What rank c.rank's output element i should be, and whether this rank checks element i at all.
struct Expectation {
  const CheckContext& c;
  const ValuePlan& plan;

  int64_t at(size_t i) const {
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
      case CollId::sendrecv: {
        const int prev = (c.rank + c.nranks - 1) % c.nranks;
        return plan.input(prev, i);
      }
    }
    return 0;
  }
};

bool has_output(const CheckContext& c) {
  const bool root_only = c.spec->id == CollId::reduce || c.spec->id == CollId::gather;
  return !root_only || c.rank == c.root;
}

}  // namespace

void fill_inputs(const CheckContext& c, const Placement& where, const ValuePlan& plan) {
  poison(where.recv);
  if (c.spec->id == CollId::broadcast) {
    if (c.rank == c.root) fill(where.send, plan, c.rank);
    return;
  }
  // In place the input may overlap the (just poisoned) output: written second, it wins.
  fill(where.send, plan, c.rank);
}

void spoil_first_output(const CheckContext& c, const Placement& where) {
  const Buffer& out = where.recv;
  if (!has_output(c) || out.ptr == nullptr || out.count == 0) return;
  auto* bytes = static_cast<unsigned char*>(out.ptr);
  for (size_t i = 0; i < dtype_size(out.dtype); ++i) bytes[i] = static_cast<unsigned char>(~bytes[i]);
}

int64_t count_wrong(const CheckContext& c, const Placement& where, const ValuePlan& plan) {
  if (!has_output(c)) return 0;
  const Expectation expect{c, plan};
  const Buffer& out = where.recv;
  int64_t wrong = 0;
  for (size_t i = 0; i < out.count; ++i) {
    const int64_t expected = expect.at(i);
    if (holds_value(out.dtype, out.ptr, i, expected)) continue;
    if (wrong < 5) {
      std::fprintf(stderr, "kolo-perf: rank %d: %s %s %s: element %zu is %s, expected %lld\n", c.rank,
                   c.spec->name, dtype_name(out.dtype), c.in_place ? "in-place" : "out-of-place", i,
                   element_text(out.dtype, out.ptr, i).c_str(), static_cast<long long>(expected));
    }
    ++wrong;
  }
  return wrong;
}

}  // namespace kolo::perf

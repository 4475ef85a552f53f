#include "peer_values.hpp"

#include <cstring>
#include <sstream>

namespace kolo::peers {
namespace {

// splitmix64: a cheap, well-mixed hash of (salt, rank, index).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash3(uint64_t salt, uint64_t a, uint64_t b) { return mix(mix(mix(salt) ^ a) ^ b); }

int64_t pick(uint64_t h, int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(h % static_cast<uint64_t>(hi - lo + 1)); }

struct Limits {
  int64_t exact;    // every integer of magnitude <= exact is representable
  bool is_signed;   // floating types count as signed
  int prod_bits;    // a product may reach 2^prod_bits
};

Limits limits_of(ElementType t) {
  switch (t) {
    case ElementType::int8: return {127, true, 6};
    case ElementType::uint8: return {255, false, 7};
    case ElementType::int32: return {int64_t{1} << 30, true, 30};
    case ElementType::uint32: return {int64_t{1} << 31, false, 31};
    case ElementType::int64: return {int64_t{1} << 40, true, 62};
    case ElementType::uint64: return {int64_t{1} << 40, false, 62};
    case ElementType::float32: return {int64_t{1} << 24, true, 62};
    case ElementType::float64: return {int64_t{1} << 40, true, 62};
  }
  return {0, false, 0};
}

}  // namespace

ValuePlan::ValuePlan(ElementType type, const ReduceKind* op, int nranks, uint64_t salt)
    : reduction_(op != nullptr), nranks_(nranks < 1 ? 1 : nranks), salt_(salt) {
  const Limits lim = limits_of(type);
  if (op != nullptr) kind_ = *op;
  signed_ = lim.is_signed;
  sum_bound_ = lim.exact / nranks_;
  any_bound_ = lim.exact < (int64_t{1} << 20) ? lim.exact : (int64_t{1} << 20);
  prod_ranks_ = lim.prod_bits;
}

int64_t ValuePlan::input(int rank, size_t index) const {
  const uint64_t h = hash3(salt_, static_cast<uint64_t>(rank), index);
  const int64_t any_lo = signed_ ? -any_bound_ : 0;
  if (!reduction_) return pick(h, any_lo, any_bound_);
  switch (kind_) {
    case ReduceKind::sum:
      return pick(h, signed_ ? -sum_bound_ : 0, sum_bound_);
    case ReduceKind::prod: {
      const int64_t magnitude = (rank < prod_ranks_ && (h & 1) != 0) ? 2 : 1;
      const bool negative = signed_ && ((h >> 1) & 3) == 0;
      return negative ? -magnitude : magnitude;
    }
    case ReduceKind::min:
    case ReduceKind::max:
      return pick(h, any_lo, any_bound_);
  }
  return 0;
}

int64_t ValuePlan::reduced(size_t index) const {
  int64_t acc = input(0, index);
  for (int r = 1; r < nranks_; ++r) {
    const int64_t v = input(r, index);
    switch (kind_) {
      case ReduceKind::sum: acc += v; break;
      case ReduceKind::prod: acc *= v; break;
      case ReduceKind::min: acc = v < acc ? v : acc; break;
      case ReduceKind::max: acc = v > acc ? v : acc; break;
    }
  }
  return acc;
}

void store_value(ElementType t, void* base, size_t index, int64_t value) {
  with_element_type(t, [&](auto zero) {
    using T = decltype(zero);
    const T v = static_cast<T>(value);
    std::memcpy(static_cast<unsigned char*>(base) + index * sizeof(T), &v, sizeof(T));
  });
}

bool holds_value(ElementType t, const void* base, size_t index, int64_t expected) {
  return with_element_type(t, [&](auto zero) {
    using T = decltype(zero);
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(base) + index * sizeof(T), sizeof(T));
    // Every expected value is representable in T, so converting it is exact; a NaN never matches.
    return v == static_cast<T>(expected);
  });
}

std::string element_text(ElementType t, const void* base, size_t index) {
  return with_element_type(t, [&](auto zero) {
    using T = decltype(zero);
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(base) + index * sizeof(T), sizeof(T));
    std::ostringstream text;
    text.precision(17);
    if constexpr (sizeof(T) == 1) {
      text << static_cast<int>(v);  // not as a character
    } else {
      text << v;
    }
    return text.str();
  });
}

}  // namespace kolo::peers

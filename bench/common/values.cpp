#include "values.hpp"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "half_float.hpp"

namespace kolo::bench {
namespace {

// splitmix64: a cheap, well-mixed hash of (salt, rank, index).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash3(uint64_t salt, uint64_t a, uint64_t b) { return mix(mix(mix(salt) ^ a) ^ b); }

// A value in [lo, hi] from the hash h.
int64_t pick(uint64_t h, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(h % static_cast<uint64_t>(hi - lo + 1));
}

struct TypeLimits {
  int64_t exact;   // every integer of magnitude <= exact is representable (and fits)
  bool is_signed;  // floating types count as signed
  int prod_bits;   // the product may reach 2^prod_bits
  int width;       // integer types: width in bits
};

TypeLimits limits_of(ElementType t) {
  switch (t) {
    case ElementType::int8: return {127, true, 6, 8};
    case ElementType::uint8: return {255, false, 7, 8};
    case ElementType::int32: return {int64_t{1} << 30, true, 30, 32};
    case ElementType::uint32: return {int64_t{1} << 31, false, 31, 32};
    case ElementType::int64: return {int64_t{1} << 40, true, 62, 64};
    case ElementType::uint64: return {int64_t{1} << 40, false, 62, 64};
    case ElementType::float16: return {2048, true, 15, 0};
    case ElementType::bfloat16: return {256, true, 62, 0};
    case ElementType::float32: return {int64_t{1} << 24, true, 62, 0};
    case ElementType::float64: return {int64_t{1} << 40, true, 62, 0};
  }
  throw std::logic_error("unknown element type");
}

uint64_t width_mask(int width) { return width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1; }

}  // namespace

void store_value(ElementType t, void* base, size_t index, int64_t value) {
  auto* bytes = static_cast<unsigned char*>(base);
  switch (t) {
    case ElementType::int8:
    case ElementType::uint8: {
      const auto v = static_cast<uint8_t>(value);
      std::memcpy(bytes + index, &v, 1);
      return;
    }
    case ElementType::int32:
    case ElementType::uint32: {
      const auto v = static_cast<uint32_t>(value);
      std::memcpy(bytes + index * 4, &v, 4);
      return;
    }
    case ElementType::int64:
    case ElementType::uint64: {
      const auto v = static_cast<uint64_t>(value);
      std::memcpy(bytes + index * 8, &v, 8);
      return;
    }
    case ElementType::float16: {
      const uint16_t v = float_to_half(static_cast<float>(value));
      std::memcpy(bytes + index * 2, &v, 2);
      return;
    }
    case ElementType::bfloat16: {
      const uint16_t v = float_to_bfloat16(static_cast<float>(value));
      std::memcpy(bytes + index * 2, &v, 2);
      return;
    }
    case ElementType::float32: {
      const auto v = static_cast<float>(value);
      std::memcpy(bytes + index * 4, &v, 4);
      return;
    }
    case ElementType::float64: {
      const auto v = static_cast<double>(value);
      std::memcpy(bytes + index * 8, &v, 8);
      return;
    }
  }
}

namespace {

// Floating elements as double; integer elements as their raw low bits.
double float_element(ElementType t, const unsigned char* bytes, size_t index) {
  switch (t) {
    case ElementType::float16: {
      uint16_t v;
      std::memcpy(&v, bytes + index * 2, 2);
      return half_to_float(v);
    }
    case ElementType::bfloat16: {
      uint16_t v;
      std::memcpy(&v, bytes + index * 2, 2);
      return bfloat16_to_float(v);
    }
    case ElementType::float32: {
      float v;
      std::memcpy(&v, bytes + index * 4, 4);
      return v;
    }
    default: {
      double v;
      std::memcpy(&v, bytes + index * 8, 8);
      return v;
    }
  }
}

uint64_t integer_bits(ElementType t, const unsigned char* bytes, size_t index) {
  const size_t size = element_size(t);
  uint64_t v = 0;
  std::memcpy(&v, bytes + index * size, size);  // little-endian: the low bytes
  return v;
}

}  // namespace

bool holds_value(ElementType t, const void* base, size_t index, int64_t expected) {
  const auto* bytes = static_cast<const unsigned char*>(base);
  if (is_floating(t)) return float_element(t, bytes, index) == static_cast<double>(expected);
  const uint64_t mask = width_mask(static_cast<int>(element_size(t) * 8));
  return integer_bits(t, bytes, index) == (static_cast<uint64_t>(expected) & mask);
}

std::string element_text(ElementType t, const void* base, size_t index) {
  const auto* bytes = static_cast<const unsigned char*>(base);
  if (is_floating(t)) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", float_element(t, bytes, index));
    return text;
  }
  const uint64_t bits = integer_bits(t, bytes, index);
  const int width = static_cast<int>(element_size(t) * 8);
  if (t == ElementType::int8 || t == ElementType::int32 || t == ElementType::int64) {
    // Sign-extend the pattern.
    const int shift = 64 - width;
    return std::to_string(static_cast<int64_t>(bits << shift) >> shift);
  }
  return std::to_string(bits);
}

ValuePlan::ValuePlan(ElementType type, const RedOp* op, int nranks, uint64_t salt)
    : reduction_(op != nullptr), nranks_(nranks < 1 ? 1 : nranks), salt_(salt) {
  const TypeLimits lim = limits_of(type);
  if (op != nullptr) kind_ = *op;
  signed_ = lim.is_signed;
  const int64_t divisor = kind_ == RedOp::premul_sum && reduction_ ? 2 * nranks_ : nranks_;
  sum_bound_ = lim.exact / divisor;
  any_bound_ = lim.exact < (int64_t{1} << 20) ? lim.exact : (int64_t{1} << 20);
  prod_bits_ = lim.prod_bits;
  width_bits_ = lim.width;
}

int64_t ValuePlan::input(int rank, size_t index) const {
  const uint64_t h = hash3(salt_, static_cast<uint64_t>(rank), index);
  const int64_t any_lo = signed_ ? -any_bound_ : 0;
  if (!reduction_) return pick(h, any_lo, any_bound_);
  switch (kind_) {
    case RedOp::sum:
    case RedOp::premul_sum:
      return pick(h, signed_ ? -sum_bound_ : 0, sum_bound_);
    case RedOp::avg: {
      // a depends on the index only (never on the rank), t on the index and the pair: pairs
      // cancel their t. |t| <= B/2 and a within B/2 of the middle keep a +- t within bounds.
      const uint64_t hi = hash3(salt_, 0xa11, index);
      const uint64_t hp = hash3(salt_, 0xb22 + static_cast<uint64_t>(rank / 2), index);
      const int64_t half = sum_bound_ / 2;
      const int64_t t = pick(hp, 0, half);
      const int64_t a = signed_ ? pick(hi, -(sum_bound_ - half), sum_bound_ - half) : pick(hi, half, sum_bound_ - half);
      const bool has_partner = (rank ^ 1) < nranks_;
      if (!has_partner) return a;
      return rank % 2 == 0 ? a + t : a - t;
    }
    case RedOp::prod: {
      const int64_t magnitude = (rank < prod_bits_ && (h & 1) != 0) ? 2 : 1;
      const bool negative = signed_ && ((h >> 1) & 3) == 0;
      return negative ? -magnitude : magnitude;
    }
    case RedOp::min:
    case RedOp::max:
      return pick(h, any_lo, any_bound_);
    case RedOp::band: {
      const uint64_t clear = (uint64_t{1} << ((h >> 8) % width_bits_)) | (uint64_t{1} << ((h >> 16) % width_bits_));
      return static_cast<int64_t>(width_mask(width_bits_) & ~clear);
    }
    case RedOp::bor:
      return static_cast<int64_t>((uint64_t{1} << ((h >> 8) % width_bits_)) | (uint64_t{1} << ((h >> 16) % width_bits_)));
    case RedOp::bxor:
      return static_cast<int64_t>(mix(h) & width_mask(width_bits_));
  }
  return 0;
}

int64_t ValuePlan::reduced(size_t index) const {
  int64_t acc = input(0, index);
  for (int r = 1; r < nranks_; ++r) {
    const int64_t v = input(r, index);
    switch (kind_) {
      case RedOp::sum:
      case RedOp::premul_sum:
      case RedOp::avg: acc += v; break;
      case RedOp::prod: acc *= v; break;
      case RedOp::min: acc = v < acc ? v : acc; break;
      case RedOp::max: acc = v > acc ? v : acc; break;
      case RedOp::band: acc &= v; break;
      case RedOp::bor: acc |= v; break;
      case RedOp::bxor: acc ^= v; break;
    }
  }
  if (kind_ == RedOp::avg) return acc / nranks_;  // exact by construction
  if (kind_ == RedOp::premul_sum) return acc * static_cast<int64_t>(kPremulFactor);
  return acc;
}

}  // namespace kolo::bench

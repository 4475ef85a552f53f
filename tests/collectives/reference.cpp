#include "reference.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace kolo::coltest {
namespace {

struct TypeFacts {
  long double exact;  // every integer up to this magnitude is representable
  bool is_signed;
  int prod_twos;      // the product may hold this many factors of 2
  int width;          // bits (integer types)
};

TypeFacts facts(DataType t) {
  switch (t) {
    case DataType::int8: return {127.0L, true, 6, 8};
    case DataType::uint8: return {255.0L, false, 7, 8};
    case DataType::int32: return {2147483647.0L, true, 30, 32};
    case DataType::uint32: return {4294967295.0L, false, 31, 32};
    case DataType::int64: return {std::ldexp(1.0L, 62), true, 62, 64};
    case DataType::uint64: return {std::ldexp(1.0L, 63), false, 62, 64};
    case DataType::float16: return {2048.0L, true, 14, 16};
    case DataType::bfloat16: return {256.0L, true, 60, 16};
    case DataType::float32: return {16777216.0L, true, 60, 32};
    case DataType::float64: return {std::ldexp(1.0L, 53), true, 60, 64};
  }
  throw std::logic_error("unknown dtype");
}

uint64_t mask_of(int width) { return width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1; }

// The value a `width`-bit pattern has in the (signed or unsigned) type.
long double pattern_value(uint64_t pattern, const TypeFacts& f) {
  pattern &= mask_of(f.width);
  if (!f.is_signed) return static_cast<long double>(pattern);
  const int shift = 64 - f.width;
  return static_cast<long double>(static_cast<int64_t>(pattern << shift) >> shift);
}

}  // namespace

bool op_valid_for(ReduceKind kind, DataType t) {
  const bool bitwise = kind == ReduceKind::band || kind == ReduceKind::bor || kind == ReduceKind::bxor;
  return !bitwise || !is_floating(t);
}

ReduceOp test_op(ReduceKind kind, DataType t) {
  if (kind == ReduceKind::premul_sum) return ReduceOp::premul_sum(is_floating(t) ? 0.5 : 2.0);
  return ReduceOp(kind);
}

long double data_value(DataType t, int rank, size_t index, uint32_t salt) {
  const auto r = static_cast<uint64_t>(rank);
  const auto i = static_cast<uint64_t>(index);
  switch (t) {
    case DataType::int8:
      return static_cast<long double>((r * 37 + i * 11 + salt) % 251) - 125;
    case DataType::uint8:
      return static_cast<long double>((r * 37 + i * 11 + salt) % 251);
    case DataType::float16:
      return static_cast<long double>((r * 4099 + i * 13 + salt) % 4001) - 2000;
    case DataType::bfloat16:
      return static_cast<long double>((r * 97 + i * 5 + salt) % 511) - 255;
    default: {
      // Wide types: the rank in the high bits, so a block from the wrong rank cannot pass.
      const long double v = static_cast<long double>(r * (uint64_t{1} << 21) + (i + salt) % (uint64_t{1} << 21));
      return (facts(t).is_signed && rank % 2 == 1) ? -v : v;
    }
  }
}

ReduceReference::ReduceReference(DataType t, const ReduceOp& op, int nranks)
    : dtype_(t), op_(op), nranks_(nranks < 1 ? 1 : nranks) {
  const TypeFacts f = facts(t);
  signed_ = f.is_signed;
  width_ = f.width;
  prod_twos_ = f.prod_twos;
  // No partial sum of nranks inputs may leave the exact range; integer premul_sum doubles the
  // sum. At most 2^20, so values stay readable in diagnostics.
  const bool doubled = op.kind == ReduceKind::premul_sum && !is_floating(t);
  const long double divisor = static_cast<long double>(nranks_) * (doubled ? 2 : 1);
  bound_ = static_cast<int64_t>(std::fmin(std::floor(f.exact / divisor), 1048576.0L));
}

int64_t ReduceReference::integer_input(int rank, size_t index) const {
  const auto r = static_cast<uint64_t>(rank);
  const auto i = static_cast<uint64_t>(index);
  switch (op_.kind) {
    case ReduceKind::sum:
    case ReduceKind::premul_sum: {
      const uint64_t h = i * 2654435761u + r * 40503u + 17u;
      const auto b = static_cast<uint64_t>(bound_);
      if (!signed_) return static_cast<int64_t>(h % (b + 1));
      return static_cast<int64_t>(h % (2 * b + 1)) - bound_;
    }
    case ReduceKind::avg: {
      // a(i) + ((r+i) mod n) - ((r+i+1) mod n): the offsets cancel over all ranks.
      const auto n = static_cast<uint64_t>(nranks_);
      const int64_t spread = nranks_ - 1;
      const uint64_t h = i * 7919u + 3u;
      int64_t a;
      if (signed_) {
        const int64_t room = bound_ - spread > 0 ? bound_ - spread : 0;
        a = static_cast<int64_t>(h % static_cast<uint64_t>(2 * room + 1)) - room;
      } else {
        const int64_t room = bound_ - 2 * spread > 0 ? bound_ - 2 * spread : 0;
        a = spread + static_cast<int64_t>(h % static_cast<uint64_t>(room + 1));
      }
      return a + static_cast<int64_t>((r + i) % n) - static_cast<int64_t>((r + i + 1) % n);
    }
    case ReduceKind::prod: {
      const bool two = rank < prod_twos_ && (i + r) % 3 == 0;
      const bool negative = signed_ && (i + 2 * r) % 5 == 1;
      return (two ? 2 : 1) * (negative ? -1 : 1);
    }
    case ReduceKind::min:
    case ReduceKind::max: {
      const auto v = static_cast<int64_t>((i * 31 + r * 17 + 5) % 201);
      return signed_ ? v - 100 : v;
    }
    default:
      throw std::logic_error("bitwise ops have bit-pattern inputs");
  }
}

uint64_t ReduceReference::pattern_input(int rank, size_t index) const {
  const auto r = static_cast<uint64_t>(rank);
  const auto i = static_cast<uint64_t>(index);
  const auto w = static_cast<uint64_t>(width_);
  switch (op_.kind) {
    case ReduceKind::band: return ~(uint64_t{1} << ((i + 3 * r) % w)) & mask_of(width_);
    case ReduceKind::bor: return (uint64_t{1} << ((i * 5 + r) % w)) | (uint64_t{1} << ((r * 7 + 1) % w));
    default: {
      uint64_t x = i * 0x9E3779B97F4A7C15ull + (r + 1) * 0xC2B2AE3D27D4EB4Full;
      x ^= x >> 29;
      return x & mask_of(width_);
    }
  }
}

long double ReduceReference::pattern_as_value(uint64_t pattern) const {
  return pattern_value(pattern, TypeFacts{0, signed_, 0, width_});
}

long double ReduceReference::input(int rank, size_t index) const {
  if (op_.is_bitwise()) return pattern_as_value(pattern_input(rank, index));
  return static_cast<long double>(integer_input(rank, index));
}

long double ReduceReference::expected(size_t index) const {
  if (op_.is_bitwise()) {
    uint64_t bits = pattern_input(0, index);
    for (int r = 1; r < nranks_; ++r) {
      const uint64_t v = pattern_input(r, index);
      if (op_.kind == ReduceKind::band) bits &= v;
      else if (op_.kind == ReduceKind::bor) bits |= v;
      else bits ^= v;
    }
    return pattern_as_value(bits);
  }
  // Exact in int64: sums stay below 2^21 * 8, products below 2^63.
  int64_t acc = integer_input(0, index);
  for (int r = 1; r < nranks_; ++r) {
    const int64_t v = integer_input(r, index);
    switch (op_.kind) {
      case ReduceKind::prod: acc *= v; break;
      case ReduceKind::min: acc = v < acc ? v : acc; break;
      case ReduceKind::max: acc = v > acc ? v : acc; break;
      default: acc += v; break;  // sum, premul_sum, avg
    }
  }
  if (op_.kind == ReduceKind::avg) {
    if (acc % nranks_ != 0) throw std::logic_error("avg inputs must sum to a multiple of nranks");
    return static_cast<long double>(acc / nranks_);
  }
  if (op_.kind == ReduceKind::premul_sum) return static_cast<long double>(acc) * static_cast<long double>(op_.factor);
  return static_cast<long double>(acc);
}

long double reduce_input(DataType t, const ReduceOp& op, int nranks, int rank, size_t index) {
  return ReduceReference(t, op, nranks).input(rank, index);
}

long double reduce_expected(DataType t, const ReduceOp& op, int nranks, size_t index) {
  return ReduceReference(t, op, nranks).expected(index);
}

uint16_t half_bits(float value) {
  // Exact values only: sign, then the normal or subnormal encoding of |value|.
  if (value == 0.0f) return std::signbit(value) ? 0x8000 : 0;
  const uint16_t sign = value < 0 ? 0x8000 : 0;
  const float magnitude = std::fabs(value);
  int exponent = 0;
  const float fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, fraction in [0.5, 1)
  const int biased = exponent - 1 + 15;
  if (biased >= 31) return sign | 0x7c00;
  if (biased <= 0) return sign | static_cast<uint16_t>(std::lround(std::ldexp(magnitude, 24)));
  const auto mantissa = static_cast<uint16_t>(std::lround((fraction * 2.0f - 1.0f) * 1024.0f));
  return sign | static_cast<uint16_t>(biased << 10) | mantissa;
}

float half_value(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float v;
  if (exponent == 0) {
    v = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    v = mantissa != 0 ? NAN : INFINITY;
  } else {
    v = std::ldexp(1.0f + static_cast<float>(mantissa) / 1024.0f, exponent - 15);
  }
  return (bits & 0x8000) ? -v : v;
}

uint16_t bfloat16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return static_cast<uint16_t>(bits >> 16);  // exact values: the low half is zero
}

float bfloat16_value(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float v;
  std::memcpy(&v, &wide, 4);
  return v;
}

void store_element(DataType t, void* base, size_t index, long double value) {
  auto put = [&](auto v) { std::memcpy(static_cast<char*>(base) + index * sizeof v, &v, sizeof v); };
  switch (t) {
    case DataType::int8: put(static_cast<int8_t>(value)); return;
    case DataType::uint8: put(static_cast<uint8_t>(value)); return;
    case DataType::int32: put(static_cast<int32_t>(value)); return;
    case DataType::uint32: put(static_cast<uint32_t>(value)); return;
    case DataType::int64: put(static_cast<int64_t>(value)); return;
    case DataType::uint64: put(static_cast<uint64_t>(value)); return;
    case DataType::float16: put(half_bits(static_cast<float>(value))); return;
    case DataType::bfloat16: put(bfloat16_bits(static_cast<float>(value))); return;
    case DataType::float32: put(static_cast<float>(value)); return;
    case DataType::float64: put(static_cast<double>(value)); return;
  }
}

long double load_element(DataType t, const void* base, size_t index) {
  auto get = [&](auto v) {
    std::memcpy(&v, static_cast<const char*>(base) + index * sizeof v, sizeof v);
    return v;
  };
  switch (t) {
    case DataType::int8: return get(int8_t{});
    case DataType::uint8: return get(uint8_t{});
    case DataType::int32: return get(int32_t{});
    case DataType::uint32: return get(uint32_t{});
    case DataType::int64: return get(int64_t{});
    case DataType::uint64: return get(uint64_t{});
    case DataType::float16: return half_value(get(uint16_t{}));
    case DataType::bfloat16: return bfloat16_value(get(uint16_t{}));
    case DataType::float32: return get(float{});
    case DataType::float64: return get(double{});
  }
  throw std::logic_error("unknown dtype");
}

std::string value_text(long double v) {
  std::ostringstream s;
  s.precision(21);
  s << v;
  return s.str();
}

}  // namespace kolo::coltest

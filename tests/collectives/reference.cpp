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
    case DataType::uint64: return {std::ldexp(1.0L, 63), false, 63, 64};
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

uint64_t value_pattern(long double v, const TypeFacts& f) {
  const uint64_t bits = v < 0 ? static_cast<uint64_t>(static_cast<int64_t>(v)) : static_cast<uint64_t>(v);
  return bits & mask_of(f.width);
}

// The bound on |input| of sum-like reductions: no partial sum of nranks inputs leaves the
// exact range. Kept at most 2^20 so the values stay readable in diagnostics.
long double sum_bound(DataType t, const ReduceOp& op, int nranks) {
  const TypeFacts f = facts(t);
  const bool doubled = op.kind == ReduceKind::premul_sum && !is_floating(t);  // factor 2
  const long double divisor = static_cast<long double>(nranks) * (doubled ? 2 : 1);
  return std::fmin(std::floor(f.exact / divisor), 1048576.0L);
}

long double avg_input(DataType t, int nranks, int rank, size_t index) {
  const TypeFacts f = facts(t);
  const long double bound = sum_bound(t, ReduceKind::avg, nranks);
  const long double spread = nranks - 1;  // |offset| <= n-1
  const auto hash = static_cast<uint64_t>(index) * 7919u + 3u;
  long double a;
  if (f.is_signed) {
    const long double room = std::fmax(bound - spread, 0.0L);
    a = static_cast<long double>(hash % static_cast<uint64_t>(2 * room + 1)) - room;
  } else {
    const long double room = std::fmax(bound - 2 * spread, 0.0L);
    a = spread + static_cast<long double>(hash % static_cast<uint64_t>(room + 1));
  }
  const size_t n = static_cast<size_t>(nranks);
  const auto offset = static_cast<long double>((static_cast<size_t>(rank) + index) % n) -
                      static_cast<long double>((static_cast<size_t>(rank) + index + 1) % n);
  return a + offset;
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

long double reduce_input(DataType t, const ReduceOp& op, int nranks, int rank, size_t index) {
  const TypeFacts f = facts(t);
  const auto r = static_cast<uint64_t>(rank);
  const auto i = static_cast<uint64_t>(index);
  switch (op.kind) {
    case ReduceKind::sum:
    case ReduceKind::premul_sum: {
      const auto bound = static_cast<uint64_t>(sum_bound(t, op, nranks));
      const uint64_t h = i * 2654435761u + r * 40503u + 17u;
      if (!f.is_signed) return static_cast<long double>(h % (bound + 1));
      return static_cast<long double>(h % (2 * bound + 1)) - static_cast<long double>(bound);
    }
    case ReduceKind::avg:
      return avg_input(t, nranks, rank, index);
    case ReduceKind::prod: {
      const bool two = rank < f.prod_twos && (i + r) % 3 == 0;
      const bool negative = f.is_signed && (i + 2 * r) % 5 == 1;
      return (two ? 2.0L : 1.0L) * (negative ? -1.0L : 1.0L);
    }
    case ReduceKind::min:
    case ReduceKind::max: {
      const long double v = static_cast<long double>((i * 31 + r * 17 + 5) % 201);
      return f.is_signed ? v - 100 : v;
    }
    case ReduceKind::band:
      return pattern_value(~(uint64_t{1} << ((i + 3 * r) % static_cast<uint64_t>(f.width))), f);
    case ReduceKind::bor:
      return pattern_value((uint64_t{1} << ((i * 5 + r) % static_cast<uint64_t>(f.width))) |
                               (uint64_t{1} << ((r * 7 + 1) % static_cast<uint64_t>(f.width))),
                           f);
    case ReduceKind::bxor: {
      uint64_t x = i * 0x9E3779B97F4A7C15ull + (r + 1) * 0xC2B2AE3D27D4EB4Full;
      x ^= x >> 29;
      return pattern_value(x, f);
    }
  }
  throw std::logic_error("unknown reduce kind");
}

long double reduce_expected(DataType t, const ReduceOp& op, int nranks, size_t index) {
  const TypeFacts f = facts(t);
  long double acc = reduce_input(t, op, nranks, 0, index);
  uint64_t bits = value_pattern(acc, f);
  for (int r = 1; r < nranks; ++r) {
    const long double v = reduce_input(t, op, nranks, r, index);
    switch (op.kind) {
      case ReduceKind::sum:
      case ReduceKind::premul_sum:
      case ReduceKind::avg: acc += v; break;
      case ReduceKind::prod: acc *= v; break;
      case ReduceKind::min: acc = std::fmin(acc, v); break;
      case ReduceKind::max: acc = std::fmax(acc, v); break;
      case ReduceKind::band: bits &= value_pattern(v, f); break;
      case ReduceKind::bor: bits |= value_pattern(v, f); break;
      case ReduceKind::bxor: bits ^= value_pattern(v, f); break;
    }
  }
  switch (op.kind) {
    case ReduceKind::band:
    case ReduceKind::bor:
    case ReduceKind::bxor: return pattern_value(bits, f);
    case ReduceKind::avg: return acc / nranks;  // exact: the sum is nranks * a(i)
    case ReduceKind::premul_sum: return acc * static_cast<long double>(op.factor);
    default: return acc;
  }
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

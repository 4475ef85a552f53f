#include "values.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace kolo::testing {
namespace {

int mantissa_bits(DataType t) {
  switch (t) {
    case DataType::float16: return 10;
    case DataType::bfloat16: return 7;
    case DataType::float32: return 23;
    default: return 52;
  }
}

uint64_t width_mask(DataType t) {
  const int w = bit_width(t);
  return w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
}

void store_bits(DataType t, void* base, size_t i, uint64_t bits) {
  const size_t es = dtype_size(t);
  std::memcpy(static_cast<unsigned char*>(base) + i * es, &bits, es);  // little-endian host
}

// float16 bits of v, which must be exactly representable.
uint16_t exact_half(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  const int e = std::ilogb(a);
  double mant;
  uint16_t exp_field;
  if (e < -14) {  // subnormal: a multiple of 2^-24
    mant = std::ldexp(a, 24);
    exp_field = 0;
  } else {
    mant = std::ldexp(a, 10 - e) - 1024;
    exp_field = static_cast<uint16_t>(e + 15);
  }
  if (e > 15 || mant != std::floor(mant) || mant < 0 || mant >= 1024)
    throw std::invalid_argument("test value " + std::to_string(v) + " is not exact in float16");
  return static_cast<uint16_t>(sign | (exp_field << 10) | static_cast<uint16_t>(mant));
}

double half_value(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  if (e == 0x1F) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t bitwise_input(ReduceKind k, DataType t, int rank, size_t i) {
  const auto w = static_cast<uint64_t>(bit_width(t));
  const auto r = static_cast<uint64_t>(rank);
  switch (k) {
    case ReduceKind::band: return ~(uint64_t{1} << ((r * 3 + i) % w)) & width_mask(t);
    case ReduceKind::bor: return ((uint64_t{1} << ((r * 5 + i * 3) % w)) | (i & 0xF)) & width_mask(t);
    default: return mix(r * 1000003 + i) & width_mask(t);
  }
}

}  // namespace

bool is_float_type(DataType t) {
  return t == DataType::float16 || t == DataType::bfloat16 || t == DataType::float32 || t == DataType::float64;
}
bool is_signed_type(DataType t) {
  return is_float_type(t) || t == DataType::int8 || t == DataType::int32 || t == DataType::int64;
}
int bit_width(DataType t) { return static_cast<int>(dtype_size(t)) * 8; }

void store_value(DataType t, void* base, size_t i, double v) {
  switch (t) {
    case DataType::float16: return store_bits(t, base, i, exact_half(v));
    case DataType::bfloat16: {
      const auto f = static_cast<float>(v);
      const auto bits = std::bit_cast<uint32_t>(f);
      if (static_cast<double>(f) != v || (bits & 0xFFFF) != 0)
        throw std::invalid_argument("test value " + std::to_string(v) + " is not exact in bfloat16");
      return store_bits(t, base, i, bits >> 16);
    }
    case DataType::float32: {
      const auto f = static_cast<float>(v);
      if (static_cast<double>(f) != v) throw std::invalid_argument("test value is not exact in float32");
      return store_bits(t, base, i, std::bit_cast<uint32_t>(f));
    }
    case DataType::float64: return store_bits(t, base, i, std::bit_cast<uint64_t>(v));
    default:
      if (v != std::floor(v)) throw std::invalid_argument("integer test value " + std::to_string(v) + " has a fraction");
      return store_bits(t, base, i, static_cast<uint64_t>(static_cast<int64_t>(v)) & width_mask(t));
  }
}

uint64_t load_bits(DataType t, const void* base, size_t i) {
  uint64_t bits = 0;
  const size_t es = dtype_size(t);
  std::memcpy(&bits, static_cast<const unsigned char*>(base) + i * es, es);
  return bits;
}

double load_value(DataType t, const void* base, size_t i) {
  const uint64_t bits = load_bits(t, base, i);
  switch (t) {
    case DataType::float16: return half_value(static_cast<uint16_t>(bits));
    case DataType::bfloat16: return std::bit_cast<float>(static_cast<uint32_t>(bits << 16));
    case DataType::float32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DataType::float64: return std::bit_cast<double>(bits);
    case DataType::int8: return static_cast<int8_t>(bits);
    case DataType::int32: return static_cast<int32_t>(bits);
    case DataType::int64: return static_cast<double>(static_cast<int64_t>(bits));
    default: return static_cast<double>(bits);
  }
}

double reduction_input(ReduceOp op, DataType t, int nranks, int rank, size_t i) {
  const bool is_signed = is_signed_type(t);
  const auto r = static_cast<int64_t>(rank);
  const auto k = static_cast<int64_t>(i % 100003);
  switch (op.kind) {
    case ReduceKind::sum:
    case ReduceKind::avg:
    case ReduceKind::premul_sum: {
      // |any partial sum| <= nranks * spread <= 120: exact in int8, uint8 and bfloat16.
      const int64_t spread = std::max<int64_t>(1, 120 / nranks);
      const int64_t v = (r * 7 + k * 3 + 5) % (spread + 1);
      return static_cast<double>(is_signed ? v - spread / 2 : v);
    }
    case ReduceKind::prod: {
      // A 2 on at most ceil(nranks/5) ranks per element, +-1 elsewhere: |product| <= 16.
      if ((k + r) % 5 == 0) return 2;
      return is_signed && (k * 3 + r) % 2 == 1 ? -1 : 1;
    }
    case ReduceKind::min:
    case ReduceKind::max: {
      const int64_t v = (r * 37 + k * 11 + 3) % 64;
      return static_cast<double>(is_signed ? v - 32 : v);
    }
    default: throw std::invalid_argument("bitwise inputs are bit patterns: use store_input");
  }
}

double expected_reduction(ReduceOp op, DataType t, int nranks, size_t i) {
  double acc = reduction_input(op, t, nranks, 0, i);
  for (int r = 1; r < nranks; ++r) {
    const double v = reduction_input(op, t, nranks, r, i);
    switch (op.kind) {
      case ReduceKind::prod: acc *= v; break;
      case ReduceKind::min: acc = std::min(acc, v); break;
      case ReduceKind::max: acc = std::max(acc, v); break;
      default: acc += v; break;
    }
  }
  if (op.kind == ReduceKind::avg)
    return is_float_type(t) ? acc / nranks : static_cast<double>(static_cast<int64_t>(acc) / nranks);
  if (op.kind == ReduceKind::premul_sum) return is_float_type(t) ? acc * op.factor : std::trunc(acc * op.factor);
  return acc;
}

uint64_t expected_bits(ReduceOp op, DataType t, int nranks, size_t i) {
  uint64_t acc = bitwise_input(op.kind, t, 0, i);
  for (int r = 1; r < nranks; ++r) {
    const uint64_t v = bitwise_input(op.kind, t, r, i);
    if (op.kind == ReduceKind::band) acc &= v;
    else if (op.kind == ReduceKind::bor) acc |= v;
    else acc ^= v;
  }
  return acc;
}

void store_input(ReduceOp op, DataType t, void* base, size_t i, int nranks, int rank, size_t input_index) {
  if (op.is_bitwise()) return store_bits(t, base, i, bitwise_input(op.kind, t, rank, input_index));
  store_value(t, base, i, reduction_input(op, t, nranks, rank, input_index));
}

std::string check_reduced(ReduceOp op, DataType t, int nranks, const void* got, size_t i, size_t input_index) {
  if (op.is_bitwise()) {
    const uint64_t g = load_bits(t, got, i), e = expected_bits(op, t, nranks, input_index);
    if (g == e) return "";
    return "element " + std::to_string(i) + ": got bits " + std::to_string(g) + ", expected " + std::to_string(e);
  }
  const double g = load_value(t, got, i), e = expected_reduction(op, t, nranks, input_index);
  // avg divides in the element type (float16/bfloat16 via float32): allow one unit in the
  // last place of the type; everything else is exact.
  const double tolerance = op.kind == ReduceKind::avg && is_float_type(t) ? std::ldexp(std::fabs(e), -mantissa_bits(t)) : 0;
  if (std::fabs(g - e) <= tolerance) return "";
  return "element " + std::to_string(i) + ": got " + std::to_string(g) + ", expected " + std::to_string(e);
}

std::vector<ReduceOp> ops_for(DataType t) {
  std::vector<ReduceOp> ops = {ReduceKind::sum, ReduceKind::prod, ReduceKind::min, ReduceKind::max, ReduceKind::avg,
                               ReduceOp::premul_sum(0.5)};
  if (!is_float_type(t)) {
    ops.push_back(ReduceKind::band);
    ops.push_back(ReduceKind::bor);
    ops.push_back(ReduceKind::bxor);
  }
  return ops;
}

std::vector<DataType> all_dtypes() {
  std::vector<DataType> out;
  for (int i = 0; i < kNumDataTypes; ++i) out.push_back(static_cast<DataType>(i));
  return out;
}

std::string describe(ReduceOp op) {
  std::string s = reduce_name(op.kind);
  if (op.kind == ReduceKind::premul_sum) {
    s += '(';
    s += std::to_string(op.factor);
    s += ')';
  }
  return s;
}

uint8_t pattern_byte(int src, size_t i, size_t k) {
  return static_cast<uint8_t>(static_cast<size_t>(src) * 67 + i * 13 + (i >> 8) * 101 + k * 29 + 11);
}

void fill_pattern(void* base, size_t count, size_t elem_size, int src, size_t first_index) {
  auto* p = static_cast<unsigned char*>(base);
  for (size_t i = 0; i < count; ++i)
    for (size_t k = 0; k < elem_size; ++k) p[i * elem_size + k] = pattern_byte(src, first_index + i, k);
}

std::string check_pattern(const void* got, size_t count, size_t elem_size, int src, size_t first_index) {
  const auto* p = static_cast<const unsigned char*>(got);
  for (size_t i = 0; i < count; ++i)
    for (size_t k = 0; k < elem_size; ++k)
      if (p[i * elem_size + k] != pattern_byte(src, first_index + i, k))
        return "element " + std::to_string(i) + " is not element " + std::to_string(first_index + i) + " of rank " +
               std::to_string(src) + "'s data";
  return "";
}

bool same_bytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

GuardedBuffer::GuardedBuffer(size_t bytes, uint8_t fill) : mem_(bytes + 2 * kGuard, 0x5C), bytes_(bytes) {
  std::memset(mem_.data() + kGuard, fill, bytes);
}

bool GuardedBuffer::guards_intact() const {
  for (size_t i = 0; i < kGuard; ++i)
    if (mem_[i] != 0x5C || mem_[kGuard + bytes_ + i] != 0x5C) return false;
  return true;
}

}  // namespace kolo::testing

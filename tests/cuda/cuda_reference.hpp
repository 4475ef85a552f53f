// The expected result of one element, computed on the host independently of the kernels:
// integers exactly in __int128 and wrapped explicitly; float32 and the 16-bit formats in
// double, float64 in __float128, each rounded once to the destination format (16-bit formats
// with the test-local encoder of tests/kernels/reference.hpp, by nearbyint on scaled
// doubles). Tolerances: integers, float32, float64 and every min/max are exact; float16 and
// bfloat16 arithmetic may be 1 ulp off the once-rounded result (the kernels round through
// float32).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include "tests/cuda/cuda_test_support.hpp"
#include "tests/kernels/reference.hpp"

namespace kolo::test::cuda {

inline __int128 integer_value(DataType t, uint64_t bits) {
  const int width = bits_of(t);
  if (!is_signed_type(t) || width == 64) {
    return is_signed_type(t) ? static_cast<__int128>(static_cast<int64_t>(bits)) : static_cast<__int128>(bits);
  }
  const uint64_t sign = uint64_t{1} << (width - 1);
  return (bits & sign) != 0 ? static_cast<__int128>(bits) - (static_cast<__int128>(1) << width)
                            : static_cast<__int128>(bits);
}

inline uint64_t integer_bits(DataType t, __int128 value) {
  const int width = bits_of(t);
  const __int128 wrapped = wrap_integer(value, width, is_signed_type(t));
  const uint64_t mask = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
  return static_cast<uint64_t>(wrapped) & mask;
}

// A float element as a double (exact for every format but float64, which is read as double).
inline double float_value(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::float16: return decode_small_float(static_cast<uint32_t>(bits), kHalfFormat);
    case DataType::bfloat16: return decode_small_float(static_cast<uint32_t>(bits), kBFloat16Format);
    case DataType::float32: return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits)));
    default: return std::bit_cast<double>(bits);
  }
}

// Rounds an exact-or-double value to the element format (nearest-even). NaN is flagged.
inline Expected float_expected(DataType t, double value, int ulps) {
  Expected e;
  e.ulps = ulps;
  if (std::isnan(value)) {
    e.nan = true;
    return e;
  }
  switch (t) {
    case DataType::float16: e.bits = encode_small_float(value, kHalfFormat); break;
    case DataType::bfloat16: e.bits = encode_small_float(value, kBFloat16Format); break;
    case DataType::float32: e.bits = std::bit_cast<uint32_t>(static_cast<float>(value)); break;
    default: e.bits = std::bit_cast<uint64_t>(value); break;
  }
  return e;
}

inline bool is_16bit_float(DataType t) { return t == DataType::float16 || t == DataType::bfloat16; }

inline Expected reference_reduce(DataType t, ReduceKind op, uint64_t a_bits, uint64_t b_bits) {
  if (is_integer_type(t)) {
    const __int128 a = integer_value(t, a_bits), b = integer_value(t, b_bits);
    __int128 r = 0;
    switch (op) {
      case ReduceKind::prod:
        r = static_cast<__int128>(static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(b));
        break;
      case ReduceKind::min: r = a < b ? a : b; break;
      case ReduceKind::max: r = a > b ? a : b; break;
      case ReduceKind::band: r = a & b; break;
      case ReduceKind::bor: r = a | b; break;
      case ReduceKind::bxor: r = a ^ b; break;
      default: r = a + b; break;  // sum, avg, premul_sum
    }
    return {integer_bits(t, r), false, 0};
  }
  if (op == ReduceKind::min || op == ReduceKind::max) {
    // No rounding involved: the result is one of the operands (or a NaN), exactly.
    const double a = float_value(t, a_bits), b = float_value(t, b_bits);
    return float_expected(t, op == ReduceKind::min ? reference_min(a, b) : reference_max(a, b), 0);
  }
  const int ulps = is_16bit_float(t) ? 1 : 0;
  if (t == DataType::float64) {
    const __float128 a = std::bit_cast<double>(a_bits), b = std::bit_cast<double>(b_bits);
    const __float128 r = op == ReduceKind::prod ? a * b : a + b;
    return float_expected(t, static_cast<double>(r), ulps);
  }
  // Products and sums of two float32 (or narrower) values are exact or rounded innocuously in double.
  const double a = float_value(t, a_bits), b = float_value(t, b_bits);
  return float_expected(t, op == ReduceKind::prod ? a * b : a + b, ulps);
}

// The finalize step of avg (divide by nranks) and premul_sum (multiply by factor; float32 and
// the 16-bit formats by float(factor), as specified) on one element.
inline Expected reference_finalize(DataType t, const ReduceOp& op, uint64_t x_bits, int nranks) {
  if (op.kind != ReduceKind::avg && op.kind != ReduceKind::premul_sum) return {x_bits, false, 0};
  const bool avg = op.kind == ReduceKind::avg;
  if (is_integer_type(t)) {
    const __int128 x = integer_value(t, x_bits);
    if (avg) return {integer_bits(t, x / nranks), false, 0};  // C++ division truncates toward zero
    const double scaled = std::trunc(static_cast<double>(x) * op.factor);
    if (std::isnan(scaled)) return {0, false, 0};
    const int width = bits_of(t);
    const __int128 lowest = is_signed_type(t) ? -(static_cast<__int128>(1) << (width - 1)) : 0;
    const __int128 highest = is_signed_type(t) ? (static_cast<__int128>(1) << (width - 1)) - 1
                                               : (static_cast<__int128>(1) << width) - 1;
    if (static_cast<long double>(scaled) <= static_cast<long double>(lowest)) return {integer_bits(t, lowest), false, 0};
    if (static_cast<long double>(scaled) >= static_cast<long double>(highest)) return {integer_bits(t, highest), false, 0};
    return {integer_bits(t, static_cast<__int128>(scaled)), false, 0};
  }
  const int ulps = is_16bit_float(t) ? 1 : 0;
  if (t == DataType::float64) {
    const __float128 x = std::bit_cast<double>(x_bits);
    const __float128 r = avg ? x / nranks : x * static_cast<__float128>(op.factor);
    return float_expected(t, static_cast<double>(r), ulps);
  }
  const double x = float_value(t, x_bits);
  const double factor = static_cast<double>(static_cast<float>(op.factor));
  return float_expected(t, avg ? x / nranks : x * factor, ulps);
}

}  // namespace kolo::test::cuda

// Test-local reference arithmetic, written independently of the kernels: 16-bit floats are
// decoded with ldexp and rounded with nearbyint on scaled doubles (no bit tricks), integers
// are reduced in __int128 and wrapped explicitly, floats are reduced in a wider type
// (__float128 for float64) and rounded once.
#pragma once
#include <cmath>
#include <cstdint>
#include "kolo/types.hpp"

namespace kolo::test {

// Format of a binary floating-point type: explicit mantissa bits, exponent bias, exponent bits.
struct FloatFormat {
  int mantissa_bits;
  int exponent_bits;
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
};
constexpr FloatFormat kHalfFormat{10, 5};
constexpr FloatFormat kBFloat16Format{7, 8};

// Decodes the bit pattern of a small binary float format into a double (exact).
inline double decode_small_float(uint32_t bits, FloatFormat f) {
  const bool negative = (bits >> (f.mantissa_bits + f.exponent_bits)) & 1;
  const int exponent = static_cast<int>((bits >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1));
  const uint32_t mantissa = bits & ((1u << f.mantissa_bits) - 1);
  double magnitude;
  if (exponent == (1 << f.exponent_bits) - 1) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - f.bias() - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa + (1u << f.mantissa_bits)), exponent - f.bias() - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// Rounds a double to the nearest value of the format (ties to even, via nearbyint in the
// default rounding mode) and encodes it. NaN becomes the canonical quiet NaN.
inline uint32_t encode_small_float(double x, FloatFormat f) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.mantissa_bits + f.exponent_bits) : 0u;
  const uint32_t exponent_all_ones = (1u << f.exponent_bits) - 1;
  if (std::isnan(x)) return (exponent_all_ones << f.mantissa_bits) | (1u << (f.mantissa_bits - 1));
  const double magnitude = std::fabs(x);
  if (std::isinf(x)) return sign | (exponent_all_ones << f.mantissa_bits);
  if (magnitude == 0) return sign;
  const int min_exponent = 1 - f.bias();  // of the smallest normal
  int exponent = std::ilogb(magnitude);
  if (exponent < min_exponent) {
    // Subnormal: count units of the smallest subnormal. 2^mantissa_bits units rounds up to
    // the smallest normal, whose encoding is that same integer.
    const double units = std::nearbyint(std::ldexp(magnitude, f.mantissa_bits - min_exponent));
    return sign | static_cast<uint32_t>(units);
  }
  double significand = std::nearbyint(std::ldexp(magnitude, f.mantissa_bits - exponent));
  if (significand == std::ldexp(1.0, f.mantissa_bits + 1)) {  // rounded up to the next binade
    significand /= 2;
    ++exponent;
  }
  if (exponent > f.bias()) return sign | (exponent_all_ones << f.mantissa_bits);  // overflow
  const uint32_t biased = static_cast<uint32_t>(exponent + f.bias());
  const uint32_t fraction = static_cast<uint32_t>(significand) - (1u << f.mantissa_bits);
  return sign | (biased << f.mantissa_bits) | fraction;
}

// Reference min/max for floating types: NaN if either is NaN, -0 below +0.
template <class F>
F reference_min(F a, F b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == 0 && b == 0) return (std::signbit(a) || std::signbit(b)) ? F(-0.0) : F(0.0);
  return a < b ? a : b;
}
template <class F>
F reference_max(F a, F b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == 0 && b == 0) return (std::signbit(a) && std::signbit(b)) ? F(-0.0) : F(0.0);
  return a > b ? a : b;
}

// Wraps an exact integer result to `bits` bits, two's complement, signed or not.
inline __int128 wrap_integer(__int128 value, int bits, bool is_signed) {
  const unsigned __int128 modulus = static_cast<unsigned __int128>(1) << bits;
  unsigned __int128 low = static_cast<unsigned __int128>(value) & (modulus - 1);
  if (is_signed && (low >> (bits - 1)) != 0) return static_cast<__int128>(low) - static_cast<__int128>(modulus);
  return static_cast<__int128>(low);
}

}  // namespace kolo::test

// Internal: the reduction of one pair of elements, for every storage type, as plain C++.
// The portable kernels apply these in loops; the AVX-512 kernels implement the same
// semantics lane by lane, so both paths agree bit for bit (except for which NaN bit pattern
// comes out of an op with a NaN operand; either way it is a NaN):
//  - Integers wrap around (two's complement), for signed types too.
//  - Floating min/max: a NaN in either operand gives a NaN; -0 is smaller than +0; otherwise
//    the smaller/larger value. (x86 MINPS alone would return the second operand for both.)
//  - float16/bfloat16 values are widened to float32, reduced, and rounded back to nearest-even.
#pragma once
#include <bit>
#include <cstdint>
#include <type_traits>
#include "kernels/cpu/half.hpp"

namespace kolo::kernels::ops {

// Storage tags of the two 16-bit float formats (both are stored as uint16_t bit patterns).
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

template <class T>
inline T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T>
inline T wrap_mul(T a, T b) {
  // Unsigned arithmetic so signed overflow is defined; 8-bit operands promote to int, whose
  // product of two values below 256 cannot overflow.
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

// Written as selects rather than early returns so the compiler can vectorise them.
template <class F>
inline F float_min(F a, F b) {
  using Bits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  F r = a < b ? a : b;
  // Equal values: identical bits, or +0 and -0, where OR-ing the sign picks -0.
  r = a == b ? std::bit_cast<F>(std::bit_cast<Bits>(a) | std::bit_cast<Bits>(b)) : r;
  // NaN in, NaN out: the NaN operand itself (a select vectorises; a + b, which could raise
  // an FP exception, is never speculated by the compiler).
  return a != a ? a : (b != b ? b : r);
}
template <class F>
inline F float_max(F a, F b) {
  using Bits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  F r = a > b ? a : b;
  r = a == b ? std::bit_cast<F>(std::bit_cast<Bits>(a) & std::bit_cast<Bits>(b)) : r;
  return a != a ? a : (b != b ? b : r);
}

// IEEE operations, shared by float32, float64 and (through float32) the 16-bit formats.
template <class F> struct FloatSum { static F apply(F a, F b) { return a + b; } };
template <class F> struct FloatProd { static F apply(F a, F b) { return a * b; } };
template <class F> struct FloatMin { static F apply(F a, F b) { return float_min(a, b); } };
template <class F> struct FloatMax { static F apply(F a, F b) { return float_max(a, b); } };

// Op<T>::apply(T, T) -> T for each storage type T.
template <class T> struct Sum { static T apply(T a, T b) { return wrap_add(a, b); } };
template <class T> struct Prod { static T apply(T a, T b) { return wrap_mul(a, b); } };
template <class T> struct Min { static T apply(T a, T b) { return b < a ? b : a; } };
template <class T> struct Max { static T apply(T a, T b) { return a < b ? b : a; } };
template <class T> struct BitAnd { static T apply(T a, T b) { return static_cast<T>(a & b); } };
template <class T> struct BitOr { static T apply(T a, T b) { return static_cast<T>(a | b); } };
template <class T> struct BitXor { static T apply(T a, T b) { return static_cast<T>(a ^ b); } };

template <> struct Sum<float> : FloatSum<float> {};
template <> struct Sum<double> : FloatSum<double> {};
template <> struct Prod<float> : FloatProd<float> {};
template <> struct Prod<double> : FloatProd<double> {};
template <> struct Min<float> : FloatMin<float> {};
template <> struct Min<double> : FloatMin<double> {};
template <> struct Max<float> : FloatMax<float> {};
template <> struct Max<double> : FloatMax<double> {};

// The 16-bit formats: widen, apply the float32 operation, round back.
template <class FloatOp>
struct HalfOp {
  static Half apply(Half a, Half b) {
    return {float_to_half_bits(FloatOp::apply(half_bits_to_float(a.bits), half_bits_to_float(b.bits)))};
  }
};
template <class FloatOp>
struct BFloat16Op {
  static BFloat16 apply(BFloat16 a, BFloat16 b) {
    return {float_to_bfloat16_bits(
        FloatOp::apply(bfloat16_bits_to_float(a.bits), bfloat16_bits_to_float(b.bits)))};
  }
};
template <> struct Sum<Half> : HalfOp<FloatSum<float>> {};
template <> struct Prod<Half> : HalfOp<FloatProd<float>> {};
template <> struct Min<Half> : HalfOp<FloatMin<float>> {};
template <> struct Max<Half> : HalfOp<FloatMax<float>> {};
template <> struct Sum<BFloat16> : BFloat16Op<FloatSum<float>> {};
template <> struct Prod<BFloat16> : BFloat16Op<FloatProd<float>> {};
template <> struct Min<BFloat16> : BFloat16Op<FloatMin<float>> {};
template <> struct Max<BFloat16> : BFloat16Op<FloatMax<float>> {};

}  // namespace kolo::kernels::ops

// Internal (nvcc only): the reduction of one pair of elements and the finalize scaling of one
// element, as device functors. Same semantics as the CPU kernels (kernels/cpu/element_ops.hpp
// and finalize.cpp), so a CPU and a GPU rank reduce to the same bits:
//  - integers wrap around (computed in the unsigned type, where overflow is defined);
//  - floating min/max: NaN if either operand is NaN, -0 below +0, else the smaller/larger;
//  - float16/bfloat16: widened to float32, reduced there, rounded back to nearest-even
//    (not __hadd & co., whose single rounding can differ from the CPU's float32 route);
//  - avg: integer division in 64 bits of the type's signedness; x / float(n) for float32 and
//    the 16-bit formats, x / double(n) for float64;
//  - premul_sum: x * float(factor) (float32, 16-bit formats), x * factor (float64); integers:
//    trunc(double(x) * factor), saturated to the type's range, NaN -> 0.
// Float arithmetic relies on nvcc's IEEE defaults (no --use_fast_math: correctly rounded
// division, no flush-to-zero).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace kolo::kernels::cuda::detail {

// ---- integers ----------------------------------------------------------------------------

template <class T>
struct IntSum {
  __device__ T operator()(T a, T b) const {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};
template <class T>
struct IntProd {
  // 8-bit operands promote to int, whose product of two values below 256 cannot overflow.
  __device__ T operator()(T a, T b) const {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
};
template <class T>
struct IntMin {
  __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};
template <class T>
struct IntMax {
  __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
template <class T>
struct BitAnd {
  __device__ T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
template <class T>
struct BitOr {
  __device__ T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
template <class T>
struct BitXor {
  __device__ T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

template <class T>
struct IntDivide {
  // A 64-bit divisor of the type's signedness: nranks may not fit in T (int8 with 200 ranks).
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  Wide divisor;
  __device__ T operator()(T x) const { return static_cast<T>(static_cast<Wide>(x) / divisor); }
};
template <class T>
struct IntScale {
  double factor;
  // The type's range, set by the host (std::numeric_limits is not callable in device code);
  // both bounds are powers of two or zero, exact in double, so the comparisons are exact.
  double lowest, highest;
  T lowest_value, highest_value;
  __device__ T operator()(T x) const {
    const double scaled = trunc(static_cast<double>(x) * factor);
    if (isnan(scaled)) return T{0};
    if (scaled <= lowest) return lowest_value;
    if (scaled >= highest) return highest_value;
    return static_cast<T>(scaled);
  }
};

// ---- float32 / float64 -------------------------------------------------------------------

__device__ inline float or_bits(float a, float b) { return __uint_as_float(__float_as_uint(a) | __float_as_uint(b)); }
__device__ inline float and_bits(float a, float b) { return __uint_as_float(__float_as_uint(a) & __float_as_uint(b)); }
__device__ inline double or_bits(double a, double b) {
  return __longlong_as_double(__double_as_longlong(a) | __double_as_longlong(b));
}
__device__ inline double and_bits(double a, double b) {
  return __longlong_as_double(__double_as_longlong(a) & __double_as_longlong(b));
}

template <class F>
struct FloatSum {
  __device__ F operator()(F a, F b) const { return a + b; }
};
template <class F>
struct FloatProd {
  __device__ F operator()(F a, F b) const { return a * b; }
};
template <class F>
struct FloatMin {
  __device__ F operator()(F a, F b) const {
    F r = a < b ? a : b;
    // Equal values: identical bits, or +0 and -0, where OR-ing the sign bits picks -0.
    if (a == b) r = or_bits(a, b);
    return isnan(a) ? a : (isnan(b) ? b : r);
  }
};
template <class F>
struct FloatMax {
  __device__ F operator()(F a, F b) const {
    F r = a > b ? a : b;
    if (a == b) r = and_bits(a, b);
    return isnan(a) ? a : (isnan(b) ? b : r);
  }
};
template <class F>
struct FloatDivide {
  F divisor;
  __device__ F operator()(F x) const { return x / divisor; }
};
template <class F>
struct FloatScale {
  F factor;
  __device__ F operator()(F x) const { return x * factor; }
};

// ---- float16 / bfloat16 ------------------------------------------------------------------

// Conversions of each 16-bit format to and from float32 (round to nearest-even).
struct HalfFormat {
  using Storage = __half;
  __device__ static float widen(__half x) { return __half2float(x); }
  __device__ static __half narrow(float x) { return __float2half_rn(x); }
};
struct BFloat16Format {
  using Storage = __nv_bfloat16;
  __device__ static float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 narrow(float x) { return __float2bfloat16_rn(x); }
};

// A float32 functor (binary or unary) applied to a 16-bit format through float32.
template <class Format, class FloatOp>
struct Widened {
  using S = typename Format::Storage;
  FloatOp op;
  __device__ S operator()(S a, S b) const { return Format::narrow(op(Format::widen(a), Format::widen(b))); }
  __device__ S operator()(S x) const { return Format::narrow(op(Format::widen(x))); }
};

}  // namespace kolo::kernels::cuda::detail

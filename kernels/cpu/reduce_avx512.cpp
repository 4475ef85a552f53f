// The AVX-512 kernels. Every function that touches a 512-bit register carries the target
// attribute below, so this file builds without -march flags and the library still loads and
// runs (on the portable table) on CPUs without AVX-512; reduce.cpp only hands out this table
// after checking the CPU. (A file-wide `#pragma GCC target` would be simpler but could leak
// AVX-512 code into inline library functions shared with other translation units.)
//
// Loop shape: a masked head aligns dst to 64 bytes (a store split across two cache lines costs
// two), then 4 vectors per iteration, then single vectors, then a masked tail. Large distinct
// destinations are written with streaming stores (see streaming_store_threshold()). Masked loads
// never fault on the lanes they skip, so any count and any alignment work without scalar code.
// Results are bit-identical to the portable kernels (element_ops.hpp), NaN payloads aside.
#include "kernels/cpu/dispatch.hpp"

#if defined(__x86_64__)

// GCC 12's intrinsics start from `__m512i __Y = __Y;` (a deliberately undefined register),
// which -Wmaybe-uninitialized reports once per inlined use (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <cstdint>

#define KOLO_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define KOLO_AVX512_INLINE KOLO_AVX512 inline __attribute__((always_inline))

namespace kolo::kernels::detail {
namespace {

// ---------------------------------------------------------------------------------------
// Lane operations on whole registers: LaneOp::op(__m512i, __m512i) -> __m512i.

KOLO_AVX512_INLINE __m512i mul_epi8(__m512i a, __m512i b) {
  // No 8-bit multiply exists: the low byte of a 16-bit product is the product of the low
  // bytes (mod 256); the odd bytes are shifted down, multiplied, and shifted back.
  const __m512i even = _mm512_mullo_epi16(a, b);
  const __m512i odd = _mm512_slli_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8)), 8);
  return _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, even, odd);
}

// IEEE float operations with the min/max rules of element_ops.hpp: VMINPS alone returns its
// second operand for NaNs and for +0/-0; equal operands are fixed up by OR-ing (min) or
// AND-ing (max) their bits, NaN operands by adding them (which yields a NaN).
struct F32Sum { KOLO_AVX512_INLINE static __m512 op(__m512 a, __m512 b) { return _mm512_add_ps(a, b); } };
struct F32Prod { KOLO_AVX512_INLINE static __m512 op(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); } };
struct F32Min {
  KOLO_AVX512_INLINE static __m512 op(__m512 a, __m512 b) {
    __m512 r = _mm512_min_ps(a, b);
    r = _mm512_mask_or_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ), a, b);
    return _mm512_mask_add_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
  }
};
struct F32Max {
  KOLO_AVX512_INLINE static __m512 op(__m512 a, __m512 b) {
    __m512 r = _mm512_max_ps(a, b);
    r = _mm512_mask_and_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ), a, b);
    return _mm512_mask_add_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
  }
};
struct F64Sum { KOLO_AVX512_INLINE static __m512d op(__m512d a, __m512d b) { return _mm512_add_pd(a, b); } };
struct F64Prod { KOLO_AVX512_INLINE static __m512d op(__m512d a, __m512d b) { return _mm512_mul_pd(a, b); } };
struct F64Min {
  KOLO_AVX512_INLINE static __m512d op(__m512d a, __m512d b) {
    __m512d r = _mm512_min_pd(a, b);
    r = _mm512_mask_or_pd(r, _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ), a, b);
    return _mm512_mask_add_pd(r, _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q), a, b);
  }
};
struct F64Max {
  KOLO_AVX512_INLINE static __m512d op(__m512d a, __m512d b) {
    __m512d r = _mm512_max_pd(a, b);
    r = _mm512_mask_and_pd(r, _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ), a, b);
    return _mm512_mask_add_pd(r, _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q), a, b);
  }
};

// Adapts a float operation to the integer-register interface of vector_kernel.
template <class F32Op>
struct OnF32 {
  KOLO_AVX512_INLINE static __m512i op(__m512i a, __m512i b) {
    return _mm512_castps_si512(F32Op::op(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b)));
  }
};
template <class F64Op>
struct OnF64 {
  KOLO_AVX512_INLINE static __m512i op(__m512i a, __m512i b) {
    return _mm512_castpd_si512(F64Op::op(_mm512_castsi512_pd(a), _mm512_castsi512_pd(b)));
  }
};

#define KOLO_LANE_OP(Name, expression) \
  struct Name { KOLO_AVX512_INLINE static __m512i op(__m512i a, __m512i b) { return expression; } };
KOLO_LANE_OP(AddI8, _mm512_add_epi8(a, b))
KOLO_LANE_OP(AddI32, _mm512_add_epi32(a, b))
KOLO_LANE_OP(AddI64, _mm512_add_epi64(a, b))
KOLO_LANE_OP(MulI8, mul_epi8(a, b))
KOLO_LANE_OP(MulI32, _mm512_mullo_epi32(a, b))
KOLO_LANE_OP(MulI64, _mm512_mullo_epi64(a, b))
KOLO_LANE_OP(MinI8, _mm512_min_epi8(a, b))
KOLO_LANE_OP(MaxI8, _mm512_max_epi8(a, b))
KOLO_LANE_OP(MinU8, _mm512_min_epu8(a, b))
KOLO_LANE_OP(MaxU8, _mm512_max_epu8(a, b))
KOLO_LANE_OP(MinI32, _mm512_min_epi32(a, b))
KOLO_LANE_OP(MaxI32, _mm512_max_epi32(a, b))
KOLO_LANE_OP(MinU32, _mm512_min_epu32(a, b))
KOLO_LANE_OP(MaxU32, _mm512_max_epu32(a, b))
KOLO_LANE_OP(MinI64, _mm512_min_epi64(a, b))
KOLO_LANE_OP(MaxI64, _mm512_max_epi64(a, b))
KOLO_LANE_OP(MinU64, _mm512_min_epu64(a, b))
KOLO_LANE_OP(MaxU64, _mm512_max_epu64(a, b))
KOLO_LANE_OP(BitAnd, _mm512_and_si512(a, b))
KOLO_LANE_OP(BitOr, _mm512_or_si512(a, b))
KOLO_LANE_OP(BitXor, _mm512_xor_si512(a, b))
#undef KOLO_LANE_OP

// ---------------------------------------------------------------------------------------
// Kernels for types whose lanes fill a register directly (all but the 16-bit floats).

KOLO_AVX512_INLINE __mmask64 first_bytes_mask(size_t bytes) {
  return bytes >= 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1;
}

template <class LaneOp>
KOLO_AVX512_INLINE void masked_vector_step(char* dst, const char* a, const char* b, __mmask64 mask) {
  const __m512i va = _mm512_maskz_loadu_epi8(mask, a);
  const __m512i vb = _mm512_maskz_loadu_epi8(mask, b);
  _mm512_mask_storeu_epi8(dst, mask, LaneOp::op(va, vb));
}

// Streaming (non-temporal) stores for large distinct destinations: see dispatch.hpp. They
// need a 64-byte aligned destination, which the head guarantees when dst is element-aligned.
KOLO_AVX512_INLINE bool use_streaming_stores(const void* dst, const void* a, const void* b, size_t bytes) {
  return bytes >= streaming_store_threshold() && dst != a && dst != b &&
         (reinterpret_cast<uintptr_t>(dst) & 63) == 0;
}

template <class LaneOp, bool kStream>
KOLO_AVX512_INLINE void vector_step(char* dst, const char* a, const char* b) {
  const __m512i r = LaneOp::op(_mm512_loadu_si512(a), _mm512_loadu_si512(b));
  if constexpr (kStream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), r);
  } else {
    _mm512_storeu_si512(dst, r);
  }
}

// Whole vectors: 4 per iteration, then single ones; returns with bytes < 64.
template <class LaneOp, bool kStream>
KOLO_AVX512_INLINE void vector_body(char*& dst, const char*& a, const char*& b, size_t& bytes) {
  for (; bytes >= 256; dst += 256, a += 256, b += 256, bytes -= 256) {
    vector_step<LaneOp, kStream>(dst, a, b);
    vector_step<LaneOp, kStream>(dst + 64, a + 64, b + 64);
    vector_step<LaneOp, kStream>(dst + 128, a + 128, b + 128);
    vector_step<LaneOp, kStream>(dst + 192, a + 192, b + 192);
  }
  for (; bytes >= 64; dst += 64, a += 64, b += 64, bytes -= 64) vector_step<LaneOp, kStream>(dst, a, b);
  // Streaming stores are weakly ordered: fence them before anyone is told the data is ready.
  if constexpr (kStream) _mm_sfence();
}

template <class LaneOp, size_t kElemSize>
KOLO_AVX512 void vector_kernel(void* dst_void, const void* a_void, const void* b_void, size_t count) {
  char* dst = static_cast<char*>(dst_void);
  const char* a = static_cast<const char*>(a_void);
  const char* b = static_cast<const char*>(b_void);
  size_t bytes = count * kElemSize;
  // Head: only when dst is element-aligned, so the lanes after it still start on elements.
  const size_t misalignment = reinterpret_cast<uintptr_t>(dst) & 63;
  if (misalignment != 0 && misalignment % kElemSize == 0) {
    const size_t head = bytes < 64 - misalignment ? bytes : 64 - misalignment;
    masked_vector_step<LaneOp>(dst, a, b, first_bytes_mask(head));
    dst += head, a += head, b += head, bytes -= head;
  }
  if (use_streaming_stores(dst, a, b, bytes)) {
    vector_body<LaneOp, true>(dst, a, b, bytes);
  } else {
    vector_body<LaneOp, false>(dst, a, b, bytes);
  }
  if (bytes != 0) masked_vector_step<LaneOp>(dst, a, b, first_bytes_mask(bytes));
}

// ---------------------------------------------------------------------------------------
// float16 and bfloat16: a register of 32 values widens to two registers of float32, the
// float operation runs on each, and the results narrow back into one register. Wrapped as a
// lane operation, they reuse vector_kernel (heads, tails and streaming stores included);
// zero lanes from masked loads are harmless +0.0 values.

KOLO_AVX512_INLINE __m256i float_to_half_lanes(__m512 f) {
  return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// Rounds float32 lanes to bfloat16 (nearest-even), leaving the result in the low 16 bits of
// each 32-bit lane. Integer arithmetic rather than VCVTNEPS2BF16, which not every AVX-512 CPU
// has and which flushes subnormals to zero.
KOLO_AVX512_INLINE __m512i float_to_bfloat16_lanes(__m512 f) {
  const __m512i bits = _mm512_castps_si512(f);
  const __m512i upper = _mm512_srli_epi32(bits, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), _mm512_and_si512(upper, _mm512_set1_epi32(1)));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
  // A NaN keeps its upper payload bits and is made quiet (rounding could turn it into inf).
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, upper, _mm512_set1_epi32(0x40));
}

struct HalfPair {
  KOLO_AVX512_INLINE static void widen(__m512i v, __m512& lo, __m512& hi) {
    lo = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
    hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
  }
  KOLO_AVX512_INLINE static __m512i narrow(__m512 lo, __m512 hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(float_to_half_lanes(lo)), float_to_half_lanes(hi), 1);
  }
};

struct BFloat16Pair {
  // Interleaving a zero word below each value makes it a float32. This reorders the values
  // (UNPCKLWD takes words 0-3 of every 128-bit lane, UNPCKHWD words 4-7); an element-wise
  // operation does not care, and narrow's PACKUSDW undoes exactly that shuffle.
  KOLO_AVX512_INLINE static void widen(__m512i v, __m512& lo, __m512& hi) {
    lo = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), v));
    hi = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), v));
  }
  KOLO_AVX512_INLINE static __m512i narrow(__m512 lo, __m512 hi) {
    // The lanes hold values below 2^16, so the unsigned saturation never triggers.
    return _mm512_packus_epi32(float_to_bfloat16_lanes(lo), float_to_bfloat16_lanes(hi));
  }
};

template <class Pair, class F32Op>
struct Through32 {
  KOLO_AVX512_INLINE static __m512i op(__m512i a, __m512i b) {
    __m512 a_lo, a_hi, b_lo, b_hi;
    Pair::widen(a, a_lo, a_hi);
    Pair::widen(b, b_lo, b_hi);
    return Pair::narrow(F32Op::op(a_lo, b_lo), F32Op::op(a_hi, b_hi));
  }
};

// In-order array conversions (finalize() scales 16-bit floats in float32 through these).
KOLO_AVX512_INLINE __mmask16 first_lanes_mask(size_t lanes) {
  return lanes >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << lanes) - 1);
}

struct HalfLanes {
  KOLO_AVX512_INLINE static __m512 widen(__m256i h) { return _mm512_cvtph_ps(h); }
  KOLO_AVX512_INLINE static __m256i narrow(__m512 f) { return float_to_half_lanes(f); }
};
struct BFloat16Lanes {
  KOLO_AVX512_INLINE static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  KOLO_AVX512_INLINE static __m256i narrow(__m512 f) { return _mm512_cvtepi32_epi16(float_to_bfloat16_lanes(f)); }
};

template <class Lanes>
KOLO_AVX512 void widen_array(const uint16_t* src, float* dst, size_t count) {
  for (; count != 0;) {
    const size_t lanes = count < 16 ? count : 16;
    const __mmask16 mask = first_lanes_mask(lanes);
    _mm512_mask_storeu_ps(dst, mask, Lanes::widen(_mm256_maskz_loadu_epi16(mask, src)));
    src += lanes, dst += lanes, count -= lanes;
  }
}

template <class Lanes>
KOLO_AVX512 void narrow_array(const float* src, uint16_t* dst, size_t count) {
  for (; count != 0;) {
    const size_t lanes = count < 16 ? count : 16;
    const __mmask16 mask = first_lanes_mask(lanes);
    _mm256_mask_storeu_epi16(dst, mask, Lanes::narrow(_mm512_maskz_loadu_ps(mask, src)));
    src += lanes, dst += lanes, count -= lanes;
  }
}

// ---------------------------------------------------------------------------------------
// The table.

struct IntegerOps {
  BinaryKernel sum, prod, min, max, band, bor, bxor;
};

template <size_t kSize, class Add, class Mul, class Min, class Max>
constexpr IntegerOps integer_ops() {
  return {vector_kernel<Add, kSize>,    vector_kernel<Mul, kSize>,   vector_kernel<Min, kSize>,
          vector_kernel<Max, kSize>,    vector_kernel<BitAnd, kSize>, vector_kernel<BitOr, kSize>,
          vector_kernel<BitXor, kSize>};
}

struct FloatOps {
  BinaryKernel sum, prod, min, max;
};

constexpr void fill_integer_row(BinaryKernel (&row)[kNumReduceKinds], const IntegerOps& k) {
  auto at = [&](ReduceKind op) -> BinaryKernel& { return row[static_cast<int>(op)]; };
  at(ReduceKind::sum) = at(ReduceKind::avg) = at(ReduceKind::premul_sum) = k.sum;
  at(ReduceKind::prod) = k.prod;
  at(ReduceKind::min) = k.min;
  at(ReduceKind::max) = k.max;
  at(ReduceKind::band) = k.band;
  at(ReduceKind::bor) = k.bor;
  at(ReduceKind::bxor) = k.bxor;
}

constexpr void fill_float_row(BinaryKernel (&row)[kNumReduceKinds], const FloatOps& k) {
  auto at = [&](ReduceKind op) -> BinaryKernel& { return row[static_cast<int>(op)]; };
  at(ReduceKind::sum) = at(ReduceKind::avg) = at(ReduceKind::premul_sum) = k.sum;
  at(ReduceKind::prod) = k.prod;
  at(ReduceKind::min) = k.min;
  at(ReduceKind::max) = k.max;
}

template <class Pair>
constexpr FloatOps sixteen_bit_ops() {
  return {vector_kernel<Through32<Pair, F32Sum>, 2>, vector_kernel<Through32<Pair, F32Prod>, 2>,
          vector_kernel<Through32<Pair, F32Min>, 2>, vector_kernel<Through32<Pair, F32Max>, 2>};
}

constexpr KernelTable make_avx512_table() {
  KernelTable table{};
  table.name = "avx512";
  auto row = [&](DataType t) -> BinaryKernel(&)[kNumReduceKinds] { return table.binary[static_cast<int>(t)]; };
  fill_integer_row(row(DataType::int8), integer_ops<1, AddI8, MulI8, MinI8, MaxI8>());
  fill_integer_row(row(DataType::uint8), integer_ops<1, AddI8, MulI8, MinU8, MaxU8>());
  fill_integer_row(row(DataType::int32), integer_ops<4, AddI32, MulI32, MinI32, MaxI32>());
  fill_integer_row(row(DataType::uint32), integer_ops<4, AddI32, MulI32, MinU32, MaxU32>());
  fill_integer_row(row(DataType::int64), integer_ops<8, AddI64, MulI64, MinI64, MaxI64>());
  fill_integer_row(row(DataType::uint64), integer_ops<8, AddI64, MulI64, MinU64, MaxU64>());
  fill_float_row(row(DataType::float16), sixteen_bit_ops<HalfPair>());
  fill_float_row(row(DataType::bfloat16), sixteen_bit_ops<BFloat16Pair>());
  fill_float_row(row(DataType::float32),
                 {vector_kernel<OnF32<F32Sum>, 4>, vector_kernel<OnF32<F32Prod>, 4>,
                  vector_kernel<OnF32<F32Min>, 4>, vector_kernel<OnF32<F32Max>, 4>});
  fill_float_row(row(DataType::float64),
                 {vector_kernel<OnF64<F64Sum>, 8>, vector_kernel<OnF64<F64Prod>, 8>,
                  vector_kernel<OnF64<F64Min>, 8>, vector_kernel<OnF64<F64Max>, 8>});
  table.half_to_float = widen_array<HalfLanes>;
  table.float_to_half = narrow_array<HalfLanes>;
  table.bfloat16_to_float = widen_array<BFloat16Lanes>;
  table.float_to_bfloat16 = narrow_array<BFloat16Lanes>;
  return table;
}

constexpr KernelTable kAvx512Table = make_avx512_table();

}  // namespace

const KernelTable& avx512_table() { return kAvx512Table; }

}  // namespace kolo::kernels::detail

#else  // not x86-64: no AVX-512 table; cpu_has_avx512() is false, so nothing asks for it.

#include "kolo/error.hpp"

namespace kolo::kernels::detail {
const KernelTable& avx512_table() { throw InvalidArgument("AVX-512 kernels exist on x86-64 only"); }
}  // namespace kolo::kernels::detail

#endif

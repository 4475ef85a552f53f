// Portable scalar conversions between float32 and the two 16-bit float formats, by bit
// manipulation (no compiler extensions, no FPU mode assumptions beyond the default
// round-to-nearest-even with subnormals enabled).
//
// They reproduce the x86 hardware conversions bit for bit (VCVTPH2PS/VCVTPS2PH for float16,
// the integer rounding sequence of reduce_avx512.cpp for bfloat16), NaN payloads included,
// so the portable and the AVX-512 kernel paths convert identically:
//  - float16 -> float32 is exact; a signalling NaN comes back quiet (as VCVTPH2PS does).
//  - float32 -> float16 rounds to nearest, ties to even; overflow gives infinity; results
//    below the normal range become subnormals (or zero); a NaN keeps its sign and the top 9
//    payload bits and is made quiet.
//  - bfloat16 -> float32 is a shift (exact, NaN untouched).
//  - float32 -> bfloat16 rounds to nearest, ties to even; a NaN keeps its top payload bits
//    and is made quiet (plain rounding could carry a NaN's payload into infinity).
#pragma once
#include <bit>
#include <cstdint>

namespace kolo::kernels {

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) {
    // Infinity keeps a zero mantissa; a NaN gets the quiet bit.
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent != 0) {
    // Rebias the exponent from 15 to 127.
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: the value is mantissa * 2^-24, exact in float32.
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
}

inline uint16_t float_to_half_bits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) {  // infinity or NaN
    if (magnitude == 0x7F800000u) return sign | 0x7C00u;
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  // 65520 (0x477FF000) is the midpoint between 65504, the largest half, and 65536; the tie
  // goes to the even neighbour, which is the overflow to infinity.
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;
  if (magnitude >= 0x38800000u) {  // normal half: |f| >= 2^-14
    // Round the 13 dropped mantissa bits to nearest-even; a carry ripples into the exponent,
    // which is exactly the right result when the mantissa overflows.
    const uint32_t odd = (magnitude >> 13) & 1u;
    const uint32_t rounded = magnitude + 0xFFFu + odd;
    return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
  }
  // Subnormal half (or zero). Adding 0.5f, whose ulp is 2^-24 (the half subnormal step),
  // makes the FPU round |f| to a multiple of 2^-24 with ties to even; the mantissa
  // difference is then the half's bits (1024 rolls over into the smallest normal, correctly).
  const float aligned = std::bit_cast<float>(magnitude) + 0.5f;
  return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(aligned) - 0x3F000000u));
}

inline float bfloat16_bits_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  // Round the low 16 bits to nearest-even; overflow carries into infinity as it should.
  const uint32_t odd = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7FFFu + odd) >> 16);
}

}  // namespace kolo::kernels

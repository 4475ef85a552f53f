// float16/bfloat16 <-> float32 conversions of each kernel implementation against the
// test-local reference (ldexp decoding, nearbyint rounding): every 16-bit pattern exhaustively,
// every rounding midpoint (and its float32 neighbours), and a sweep of float32 bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>
#include "tests/kernels/kernel_test_support.hpp"

namespace kolo::test {
namespace {

using kernels::detail::KernelTable;

float float_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

struct Format16 {
  const char* name;
  FloatFormat format;
  kernels::detail::ToFloatKernel KernelTable::*widen;
  kernels::detail::FromFloatKernel KernelTable::*narrow;
};
const Format16 kFormats[] = {
    {"float16", kHalfFormat, &KernelTable::half_to_float, &KernelTable::float_to_half},
    {"bfloat16", kBFloat16Format, &KernelTable::bfloat16_to_float, &KernelTable::float_to_bfloat16},
};

const KernelTable& table_for(KernelPath p) {
  return p == KernelPath::avx512 ? kernels::detail::avx512_table() : kernels::detail::portable_table();
}

class ConversionTest : public ::testing::TestWithParam<KernelPath> {};

TEST_P(ConversionTest, WidenEverySixteenBitPattern) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  const KernelTable& table = table_for(GetParam());
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> widened(65536);
  for (const Format16& f : kFormats) {
    (table.*f.widen)(all.data(), widened.data(), all.size());
    for (uint32_t i = 0; i < 65536; ++i) {
      const double want = decode_small_float(i, f.format);
      const float got = widened[i];
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << f.name << " pattern " << i;
        // Sign and the payload's top bits survive.
        const int payload_shift = 23 - f.format.mantissa_bits;
        const uint32_t payload_mask = (1u << f.format.mantissa_bits) - 1;
        ASSERT_EQ(std::signbit(got), (i & 0x8000) != 0) << f.name << " NaN sign, pattern " << i;
        ASSERT_EQ((bits_of(got) >> payload_shift) & payload_mask & ~(1u << (f.format.mantissa_bits - 1)),
                  i & payload_mask & ~(1u << (f.format.mantissa_bits - 1)))
            << f.name << " NaN payload, pattern " << i;
      } else {
        ASSERT_EQ(bits_of(got), bits_of(static_cast<float>(want))) << f.name << " pattern " << i;
      }
    }
  }
}

// Checks narrow(x) against the reference for every float32 in `inputs`.
void expect_narrowing_matches(const KernelTable& table, const Format16& f, const std::vector<float>& inputs) {
  std::vector<uint16_t> narrowed(inputs.size());
  (table.*f.narrow)(inputs.data(), narrowed.data(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const float x = inputs[i];
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(decode_small_float(narrowed[i], f.format))) << f.name << " of NaN " << std::hex << bits_of(x);
      ASSERT_EQ((narrowed[i] & 0x8000) != 0, std::signbit(x)) << f.name << " NaN sign";
      continue;
    }
    ASSERT_EQ(narrowed[i], encode_small_float(x, f.format))
        << f.name << " of float bits 0x" << std::hex << bits_of(x) << " (" << x << ")";
  }
}

TEST_P(ConversionTest, NarrowRoundsEveryMidpointToNearestEven) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  const KernelTable& table = table_for(GetParam());
  for (const Format16& f : kFormats) {
    // Every exact midpoint between adjacent finite 16-bit values (also past the largest
    // finite, towards overflow), and the float32 values just below and above it.
    std::vector<float> inputs;
    for (uint32_t i = 0; i < 0x8000; ++i) {
      const double lo = decode_small_float(i, f.format);
      if (!std::isfinite(lo)) continue;
      const double next = decode_small_float(i + 1, f.format);
      // The step after the largest finite value is the same as the one before it.
      const double hi = std::isfinite(next) ? next : lo + (lo - decode_small_float(i - 1, f.format));
      const float mid = static_cast<float>((lo + hi) / 2);  // exact: a few bits more than 16
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), static_cast<float>(lo)}) {
        inputs.push_back(x);
        inputs.push_back(-x);
      }
    }
    expect_narrowing_matches(table, f, inputs);
  }
}

TEST_P(ConversionTest, NarrowSweepOfFloat32BitPatterns) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  const KernelTable& table = table_for(GetParam());
  // A prime stride touches every exponent (NaNs and subnormals included) with varied mantissas.
  std::vector<float> inputs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093) inputs.push_back(float_from_bits(static_cast<uint32_t>(b)));
  for (uint32_t special : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFFC00000u, 0x7F7FFFFFu,
                           0x00000001u, 0x477FEFFFu, 0x477FF000u, 0x7F7F8000u, 0x7F7F7FFFu}) {
    inputs.push_back(float_from_bits(special));
  }
  for (const Format16& f : kFormats) expect_narrowing_matches(table, f, inputs);
}

TEST_P(ConversionTest, ArrayLengthsAndTailsAreExact) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  const KernelTable& table = table_for(GetParam());
  for (const Format16& f : kFormats) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100}}) {
      // One guard element each side must survive.
      std::vector<uint16_t> src(n + 2, 0x1234), back(n + 2, 0xBEEF);
      std::vector<float> wide(n + 2, -7.0f);
      for (size_t i = 0; i < n; ++i) src[i + 1] = static_cast<uint16_t>(0x3C00 + 37 * i);
      (table.*f.widen)(src.data() + 1, wide.data() + 1, n);
      (table.*f.narrow)(wide.data() + 1, back.data() + 1, n);
      EXPECT_EQ(wide.front(), -7.0f);
      EXPECT_EQ(wide.back(), -7.0f);
      EXPECT_EQ(back.front(), 0xBEEF);
      EXPECT_EQ(back.back(), 0xBEEF);
      for (size_t i = 1; i <= n; ++i) EXPECT_EQ(back[i], src[i]) << f.name << " round trip, n " << n << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BothPaths, ConversionTest, ::testing::Values(KernelPath::portable, KernelPath::avx512),
                         [](const ::testing::TestParamInfo<KernelPath>& info) { return path_name(info.param); });

TEST(ConversionAgreement, PathsAgreeBitForBitIncludingNaNs) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(KernelPath::avx512);
  const KernelTable& portable = kernels::detail::portable_table();
  const KernelTable& avx512 = kernels::detail::avx512_table();
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide_p(65536), wide_v(65536);
  std::vector<float> floats;
  for (uint64_t b = 0x7F7F0000u; b < 0x80000000u; b += 7) floats.push_back(float_from_bits(static_cast<uint32_t>(b)));
  std::vector<uint16_t> narrow_p(floats.size()), narrow_v(floats.size());
  for (const Format16& f : kFormats) {
    (portable.*f.widen)(all.data(), wide_p.data(), all.size());
    (avx512.*f.widen)(all.data(), wide_v.data(), all.size());
    ASSERT_EQ(0, std::memcmp(wide_p.data(), wide_v.data(), wide_p.size() * 4)) << f.name << " widening differs";
    // Near the top of the range: overflow, infinity and NaN payloads.
    (portable.*f.narrow)(floats.data(), narrow_p.data(), floats.size());
    (avx512.*f.narrow)(floats.data(), narrow_v.data(), floats.size());
    ASSERT_EQ(narrow_p, narrow_v) << f.name << " narrowing differs";
  }
}

}  // namespace
}  // namespace kolo::test

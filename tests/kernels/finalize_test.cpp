// finalize(): avg's division and premul_sum's multiplication for every dtype, under each
// kernel implementation (float16/bfloat16 use the implementation's converters), against
// references computed in __int128 (integers) and in wider floating types.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>
#include "kernels/cpu/reduce.hpp"
#include "kolo/error.hpp"
#include "tests/kernels/kernel_test_support.hpp"

namespace kolo::test {
namespace {

constexpr size_t kCount = 1001;  // more than one 1024-block would need; odd, so tails run
constexpr int kRankCounts[] = {1, 2, 3, 7, 200};

uint64_t bits_of_double(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}
uint32_t bits_of_float(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Expected bits after scaling one floating element: the 32-bit formats compute in float32
// (modelled as the double result rounded to float, innocuous for one division or for a
// product that is exact in double), float64 in quad precision rounded once.
uint64_t expected_float(DataType t, uint64_t bits, bool divide, double operand) {
  if (t == DataType::float64) {
    const __float128 x = float_value(t, bits);
    const __float128 r = divide ? x / static_cast<__float128>(operand) : x * static_cast<__float128>(operand);
    return bits_of_double(static_cast<double>(r));
  }
  const double x = float_value(t, bits);
  const double o = static_cast<float>(operand);
  const float in_float32 = static_cast<float>(divide ? x / o : x * o);
  switch (t) {
    case DataType::float16: return encode_small_float(in_float32, kHalfFormat);
    case DataType::bfloat16: return encode_small_float(in_float32, kBFloat16Format);
    default: return bits_of_float(in_float32);
  }
}

::testing::AssertionResult floats_match(DataType t, const std::vector<uint64_t>& before, const void* data,
                                        bool divide, double operand) {
  for (size_t i = 0; i < before.size(); ++i) {
    const uint64_t got = load_bits(data, dtype_size(t), i);
    if (std::isnan(float_value(t, before[i]))) {
      if (!std::isnan(float_value(t, got))) return ::testing::AssertionFailure() << "NaN lost at " << i;
      continue;
    }
    const uint64_t want = expected_float(t, before[i], divide, operand);
    if (got != want) {
      return ::testing::AssertionFailure() << "element " << i << ": input bits " << std::hex << before[i]
                                           << " gave " << got << ", expected " << want;
    }
  }
  return ::testing::AssertionSuccess();
}

// Fills `count` random elements into a fresh buffer and returns their bits.
std::vector<uint64_t> fill_random(DataType t, std::vector<unsigned char>& buffer, std::mt19937_64& rng) {
  buffer.assign(kCount * dtype_size(t), 0);
  std::vector<uint64_t> bits(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    bits[i] = random_bits(t, rng);
    store_bits(buffer.data(), dtype_size(t), i, bits[i]);
  }
  return bits;
}

class FinalizeTest : public ::testing::TestWithParam<KernelPath> {};

TEST_P(FinalizeTest, AvgDividesIntegersTruncatingTowardZero) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  KernelPathScope scope(GetParam());
  std::mt19937_64 rng(11);
  for (DataType t : all_dtypes()) {
    if (is_floating(t)) continue;
    for (int nranks : kRankCounts) {
      std::vector<unsigned char> buffer;
      const std::vector<uint64_t> before = fill_random(t, buffer, rng);
      kernels::finalize(t, ReduceKind::avg, buffer.data(), kCount, nranks);
      for (size_t i = 0; i < kCount; ++i) {
        const __int128 want = integer_value(t, before[i]) / nranks;  // C++ division truncates
        ASSERT_EQ(static_cast<int64_t>(integer_value(t, load_bits(buffer.data(), dtype_size(t), i)) - want), 0)
            << dtype_name(t) << " / " << nranks << " at " << i;
      }
    }
  }
}

TEST_P(FinalizeTest, AvgDividesFloats) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  KernelPathScope scope(GetParam());
  std::mt19937_64 rng(12);
  for (DataType t : all_dtypes()) {
    if (!is_floating(t)) continue;
    for (int nranks : kRankCounts) {
      std::vector<unsigned char> buffer;
      const std::vector<uint64_t> before = fill_random(t, buffer, rng);
      kernels::finalize(t, ReduceKind::avg, buffer.data(), kCount, nranks);
      EXPECT_TRUE(floats_match(t, before, buffer.data(), true, nranks)) << dtype_name(t) << " / " << nranks;
    }
  }
}

TEST_P(FinalizeTest, PremulSumScalesFloats) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  KernelPathScope scope(GetParam());
  std::mt19937_64 rng(13);
  for (DataType t : all_dtypes()) {
    if (!is_floating(t)) continue;
    for (double factor : {0.5, 0.1, -3.0, 1.0 / 3.0, 1e-3}) {
      std::vector<unsigned char> buffer;
      const std::vector<uint64_t> before = fill_random(t, buffer, rng);
      kernels::finalize(t, ReduceOp::premul_sum(factor), buffer.data(), kCount, 4);
      EXPECT_TRUE(floats_match(t, before, buffer.data(), false, factor)) << dtype_name(t) << " * " << factor;
    }
  }
}

// Integer premul_sum: multiply in double, truncate toward zero, saturate. The factors are
// m / 2^k with |m| <= 1000 and the 64-bit inputs below 2^40 in magnitude, so the reference can be exact integer
// arithmetic: trunc(x * m / 2^k) in __int128.
TEST_P(FinalizeTest, PremulSumScalesIntegersTruncatingAndSaturating) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  KernelPathScope scope(GetParam());
  std::mt19937_64 rng(14);
  struct Dyadic {
    int64_t numerator;
    int shift;
  };
  for (DataType t : all_dtypes()) {
    if (is_floating(t)) continue;
    const int bits = bit_width_of(t);
    const bool is_signed = is_signed_integer(t);
    const __int128 lo = is_signed ? -(static_cast<__int128>(1) << (bits - 1)) : 0;
    const __int128 hi = is_signed ? (static_cast<__int128>(1) << (bits - 1)) - 1 : (static_cast<__int128>(1) << bits) - 1;
    for (Dyadic f : {Dyadic{1, 1}, Dyadic{5, 1}, Dyadic{-3, 0}, Dyadic{-5, 2}, Dyadic{1000, 0}, Dyadic{7, 3}}) {
      const double factor = std::ldexp(static_cast<double>(f.numerator), -f.shift);
      std::vector<unsigned char> buffer(kCount * dtype_size(t));
      std::vector<__int128> before(kCount);
      for (size_t i = 0; i < kCount; ++i) {
        const uint64_t raw = random_bits(t, rng);
        // 64-bit inputs keep 40 bits (sign included) so x * m stays exact in a double.
        before[i] = bits < 64 ? integer_value(t, raw)
                              : (is_signed ? static_cast<__int128>(static_cast<int64_t>(raw) >> 24)
                                           : static_cast<__int128>(raw >> 24));
        store_bits(buffer.data(), dtype_size(t), i, static_cast<uint64_t>(before[i]));
      }
      kernels::finalize(t, ReduceOp::premul_sum(factor), buffer.data(), kCount, 4);
      for (size_t i = 0; i < kCount; ++i) {
        __int128 want = before[i] * f.numerator / (static_cast<__int128>(1) << f.shift);
        want = want < lo ? lo : (want > hi ? hi : want);
        const __int128 got = integer_value(t, load_bits(buffer.data(), dtype_size(t), i));
        ASSERT_TRUE(got == want) << dtype_name(t) << " " << static_cast<int64_t>(before[i]) << " * " << factor
                                 << " gave " << static_cast<int64_t>(got) << ", expected " << static_cast<int64_t>(want);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BothPaths, FinalizeTest, ::testing::Values(KernelPath::portable, KernelPath::avx512),
                         [](const ::testing::TestParamInfo<KernelPath>& info) { return path_name(info.param); });

TEST(FinalizeEdges, IntegerSaturationAndNaNFactor) {
  int8_t i8[3] = {100, -100, 3};
  kernels::finalize(DataType::int8, ReduceOp::premul_sum(1e30), i8, 3, 1);
  EXPECT_EQ(i8[0], 127);
  EXPECT_EQ(i8[1], -128);
  EXPECT_EQ(i8[2], 127);
  uint64_t u64[2] = {5, std::numeric_limits<uint64_t>::max()};
  kernels::finalize(DataType::uint64, ReduceOp::premul_sum(-2.0), u64, 2, 1);
  EXPECT_EQ(u64[0], 0u);
  EXPECT_EQ(u64[1], 0u);
  int64_t i64[2] = {std::numeric_limits<int64_t>::max(), 7};
  kernels::finalize(DataType::int64, ReduceOp::premul_sum(4.0), i64, 1, 1);  // count 1: i64[1] untouched
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[1], 7);
  int32_t i32[2] = {-7, 7};
  kernels::finalize(DataType::int32, ReduceOp::premul_sum(std::nan("")), i32, 2, 1);
  EXPECT_EQ(i32[0], 0);
  EXPECT_EQ(i32[1], 0);
  // Truncation toward zero, for both signs.
  int32_t t32[2] = {-7, 7};
  kernels::finalize(DataType::int32, ReduceKind::avg, t32, 2, 2);
  EXPECT_EQ(t32[0], -3);
  EXPECT_EQ(t32[1], 3);
}

TEST(FinalizeEdges, OtherOpsLeaveDataAlone) {
  const float original[3] = {1.5f, -2.0f, 3.25f};
  for (ReduceKind op : {ReduceKind::sum, ReduceKind::prod, ReduceKind::min, ReduceKind::max}) {
    float data[3] = {1.5f, -2.0f, 3.25f};
    kernels::finalize(DataType::float32, op, data, 3, 8);
    EXPECT_EQ(0, std::memcmp(data, original, sizeof data)) << reduce_name(op);
  }
}

TEST(FinalizeEdges, RejectsBadArguments) {
  float data[2] = {1, 2};
  EXPECT_THROW(kernels::finalize(DataType::float32, ReduceKind::avg, data, 2, 0), InvalidArgument);
  EXPECT_THROW(kernels::finalize(DataType::int32, ReduceKind::avg, data, 2, -3), InvalidArgument);
  EXPECT_THROW(kernels::finalize(static_cast<DataType>(kNumDataTypes), ReduceKind::avg, data, 2, 2), InvalidArgument);
  EXPECT_THROW(kernels::finalize(DataType::float32, ReduceKind::avg, nullptr, 2, 2), InvalidArgument);
  EXPECT_NO_THROW(kernels::finalize(DataType::float32, ReduceKind::avg, nullptr, 0, 2));
}

}  // namespace
}  // namespace kolo::test

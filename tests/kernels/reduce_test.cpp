// reduce() and reduce_inplace() for every dtype x op, under each kernel implementation,
// checked element by element against the test-local reference (reference.hpp): many counts
// (heads, full vectors, unrolled loops, tails), unaligned pointers, every aliasing form, and
// guard bytes around every buffer.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>
#include "kernels/cpu/reduce.hpp"
#include "kolo/error.hpp"
#include "tests/kernels/kernel_test_support.hpp"

namespace kolo::test {
namespace {

struct Expected {
  uint64_t bits;
  bool nan;  // any NaN is accepted (which payload survives is not specified)
};

bool is_bitwise(ReduceKind op) {
  return op == ReduceKind::band || op == ReduceKind::bor || op == ReduceKind::bxor;
}

Expected reference_integer(DataType t, ReduceKind op, uint64_t a_bits, uint64_t b_bits) {
  const __int128 a = integer_value(t, a_bits);
  const __int128 b = integer_value(t, b_bits);
  __int128 r = 0;
  switch (op) {
    case ReduceKind::sum:
    case ReduceKind::avg:
    case ReduceKind::premul_sum: r = a + b; break;
    // Unsigned 128-bit product: uint64 x uint64 would overflow a signed __int128; only the
    // low bits matter after wrapping anyway.
    case ReduceKind::prod:
      r = static_cast<__int128>(static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(b));
      break;
    case ReduceKind::min: r = a < b ? a : b; break;
    case ReduceKind::max: r = a > b ? a : b; break;
    case ReduceKind::band: r = a & b; break;
    case ReduceKind::bor: r = a | b; break;
    case ReduceKind::bxor: r = a ^ b; break;
  }
  const int bits = bit_width_of(t);
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  return {static_cast<uint64_t>(wrap_integer(r, bits, is_signed_integer(t))) & mask, false};
}

// Applies a floating op in type W (wide enough for the exact or innocuously rounded result).
template <class W>
W apply_float(ReduceKind op, W a, W b) {
  switch (op) {
    case ReduceKind::prod: return a * b;
    case ReduceKind::min: return reference_min(a, b);
    case ReduceKind::max: return reference_max(a, b);
    default: return a + b;  // sum, avg, premul_sum
  }
}

Expected reference_float(DataType t, ReduceKind op, uint64_t a_bits, uint64_t b_bits) {
  switch (t) {
    case DataType::float16:
    case DataType::bfloat16: {
      // Exact (float16) or rounded in double, whose 53 bits make the second rounding to a
      // 16-bit format innocuous: the result is the correctly rounded one.
      const FloatFormat f = t == DataType::float16 ? kHalfFormat : kBFloat16Format;
      const double r = apply_float<double>(op, float_value(t, a_bits), float_value(t, b_bits));
      return {encode_small_float(r, f), std::isnan(r)};
    }
    case DataType::float32: {
      const double r = apply_float<double>(op, float_value(t, a_bits), float_value(t, b_bits));
      const float rounded = static_cast<float>(r);
      uint32_t bits;
      std::memcpy(&bits, &rounded, 4);
      return {bits, std::isnan(r)};
    }
    default: {
      // float64: sums and products in quad precision, rounded once to double.
      const double a = float_value(t, a_bits), b = float_value(t, b_bits);
      double rounded;
      if (op == ReduceKind::min || op == ReduceKind::max) {
        rounded = apply_float<double>(op, a, b);
      } else {
        const __float128 qa = a, qb = b;
        rounded = static_cast<double>(op == ReduceKind::prod ? qa * qb : qa + qb);
      }
      uint64_t bits;
      std::memcpy(&bits, &rounded, 8);
      return {bits, std::isnan(rounded)};
    }
  }
}

Expected reference_reduce(DataType t, ReduceKind op, uint64_t a, uint64_t b) {
  return is_floating(t) ? reference_float(t, op, a, b) : reference_integer(t, op, a, b);
}

enum class Form { distinct, dst_is_a, dst_is_b, all_same, inplace };
constexpr Form kForms[] = {Form::distinct, Form::dst_is_a, Form::dst_is_b, Form::all_same, Form::inplace};
const char* form_name(Form f) {
  switch (f) {
    case Form::distinct: return "reduce(dst, a, b)";
    case Form::dst_is_a: return "reduce(a, a, b)";
    case Form::dst_is_b: return "reduce(b, a, b)";
    case Form::all_same: return "reduce(a, a, a)";
    case Form::inplace: return "reduce_inplace(a, b)";
  }
  return "?";
}

// Element offsets of dst, a and b from a 64-byte boundary.
struct Offsets {
  size_t dst, a, b;
};
constexpr Offsets kOffsets[] = {{0, 0, 0}, {1, 1, 1}, {1, 0, 3}, {5, 2, 0}};
constexpr size_t kCounts[] = {0, 1, 7, 31, 63, 64, 65, 1001, 4099};

std::string hex(uint64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "0x%" PRIx64, v);
  return s;
}

::testing::AssertionResult matches_reference(DataType t, ReduceKind op, const std::vector<uint64_t>& a,
                                             const std::vector<uint64_t>& b, const void* result) {
  const size_t size = dtype_size(t);
  for (size_t i = 0; i < a.size(); ++i) {
    const Expected want = reference_reduce(t, op, a[i], b[i]);
    const uint64_t got = load_bits(result, size, i);
    const bool ok = want.nan ? std::isnan(float_value(t, got)) : got == want.bits;
    if (!ok) {
      return ::testing::AssertionFailure() << "element " << i << " of " << a.size() << ": " << hex(a[i]) << " "
                                           << reduce_name(op) << " " << hex(b[i]) << " gave " << hex(got)
                                           << ", expected " << (want.nan ? "a NaN" : hex(want.bits));
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult unchanged(DataType t, const std::vector<uint64_t>& before, const void* data) {
  for (size_t i = 0; i < before.size(); ++i) {
    if (load_bits(data, dtype_size(t), i) != before[i]) {
      return ::testing::AssertionFailure() << "input element " << i << " was modified";
    }
  }
  return ::testing::AssertionSuccess();
}

void run_case(DataType t, ReduceKind op, size_t count, Offsets offsets, Form form, std::mt19937_64& rng) {
  const size_t size = dtype_size(t);
  GuardedBuffer dst(count * size, offsets.dst * size);
  GuardedBuffer a_buf(count * size, offsets.a * size);
  GuardedBuffer b_buf(count * size, offsets.b * size);
  std::vector<uint64_t> a(count), b(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = random_bits(t, rng);
    b[i] = random_bits(t, rng);
    store_bits(a_buf.data(), size, i, a[i]);
    store_bits(b_buf.data(), size, i, b[i]);
    store_bits(dst.data(), size, i, random_bits(t, rng));  // stale contents to overwrite
  }
  switch (form) {
    case Form::distinct:
      kernels::reduce(t, op, dst.data(), a_buf.data(), b_buf.data(), count);
      EXPECT_TRUE(matches_reference(t, op, a, b, dst.data()));
      EXPECT_TRUE(unchanged(t, a, a_buf.data()));
      EXPECT_TRUE(unchanged(t, b, b_buf.data()));
      break;
    case Form::dst_is_a:
      kernels::reduce(t, op, a_buf.data(), a_buf.data(), b_buf.data(), count);
      EXPECT_TRUE(matches_reference(t, op, a, b, a_buf.data()));
      EXPECT_TRUE(unchanged(t, b, b_buf.data()));
      break;
    case Form::dst_is_b:
      kernels::reduce(t, op, b_buf.data(), a_buf.data(), b_buf.data(), count);
      EXPECT_TRUE(matches_reference(t, op, a, b, b_buf.data()));
      EXPECT_TRUE(unchanged(t, a, a_buf.data()));
      break;
    case Form::all_same:
      kernels::reduce(t, op, a_buf.data(), a_buf.data(), a_buf.data(), count);
      EXPECT_TRUE(matches_reference(t, op, a, a, a_buf.data()));
      break;
    case Form::inplace:
      kernels::reduce_inplace(t, op, a_buf.data(), b_buf.data(), count);
      EXPECT_TRUE(matches_reference(t, op, a, b, a_buf.data()));
      EXPECT_TRUE(unchanged(t, b, b_buf.data()));
      break;
  }
  EXPECT_TRUE(dst.guards_intact()) << "write outside dst";
  EXPECT_TRUE(a_buf.guards_intact()) << "write outside a";
  EXPECT_TRUE(b_buf.guards_intact()) << "write outside b";
}

struct ReduceCase {
  KernelPath path;
  DataType dtype;
  ReduceKind op;
};

void PrintTo(const ReduceCase& c, std::ostream* os) {
  *os << path_name(c.path) << " " << dtype_name(c.dtype) << " " << reduce_name(c.op);
}

class ReduceTest : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(ReduceTest, MatchesReferenceForEveryCountAliasingAndAlignment) {
  const ReduceCase c = GetParam();
  KOLO_SKIP_IF_PATH_UNAVAILABLE(c.path);
  KernelPathScope scope(c.path);
  std::mt19937_64 rng(static_cast<uint64_t>(c.dtype) * 131 + static_cast<uint64_t>(c.op));
  for (size_t count : kCounts) {
    for (Offsets offsets : kOffsets) {
      for (Form form : kForms) {
        SCOPED_TRACE(::testing::Message() << form_name(form) << ", count " << count << ", element offsets dst "
                                          << offsets.dst << " a " << offsets.a << " b " << offsets.b);
        run_case(c.dtype, c.op, count, offsets, form, rng);
        if (HasFailure()) return;  // one detailed failure is enough
      }
    }
  }
}

std::vector<ReduceCase> all_cases() {
  std::vector<ReduceCase> cases;
  for (KernelPath path : {KernelPath::portable, KernelPath::avx512}) {
    for (DataType t : all_dtypes()) {
      for (int k = 0; k < kNumReduceKinds; ++k) {
        const auto op = static_cast<ReduceKind>(k);
        if (is_floating(t) && is_bitwise(op)) continue;
        cases.push_back({path, t, op});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<ReduceCase>& info) {
                           return std::string(path_name(info.param.path)) + "_" + dtype_name(info.param.dtype) +
                                  "_" + reduce_name(info.param.op);
                         });

// Large distinct destinations take the streaming-store loop of the AVX-512 kernels. The
// threshold is lowered for this test so the loop runs on small buffers with every count,
// alignment and aliasing form (aliased forms must keep using ordinary stores).
class StreamingStoreTest : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(StreamingStoreTest, MatchesReferenceAboveTheThreshold) {
  const ReduceCase c = GetParam();
  KOLO_SKIP_IF_PATH_UNAVAILABLE(c.path);
  KernelPathScope scope(c.path);
  kernels::detail::set_streaming_store_threshold(256);
  std::mt19937_64 rng(99);
  for (size_t count : {size_t{200}, size_t{1001}, size_t{4099}}) {
    for (Offsets offsets : kOffsets) {
      for (Form form : kForms) {
        SCOPED_TRACE(::testing::Message() << form_name(form) << ", count " << count << ", element offsets dst "
                                          << offsets.dst << " a " << offsets.a << " b " << offsets.b);
        run_case(c.dtype, c.op, count, offsets, form, rng);
      }
    }
  }
  kernels::detail::set_streaming_store_threshold(0);
  EXPECT_EQ(kernels::detail::streaming_store_threshold(), kernels::detail::kDefaultStreamingStoreThresholdBytes);
}

INSTANTIATE_TEST_SUITE_P(SmallThreshold, StreamingStoreTest,
                         ::testing::Values(ReduceCase{KernelPath::avx512, DataType::float32, ReduceKind::sum},
                                           ReduceCase{KernelPath::avx512, DataType::float16, ReduceKind::sum},
                                           ReduceCase{KernelPath::avx512, DataType::bfloat16, ReduceKind::max},
                                           ReduceCase{KernelPath::avx512, DataType::int8, ReduceKind::prod},
                                           ReduceCase{KernelPath::avx512, DataType::uint64, ReduceKind::bxor},
                                           ReduceCase{KernelPath::portable, DataType::float32, ReduceKind::sum}),
                         [](const ::testing::TestParamInfo<ReduceCase>& info) {
                           return std::string(path_name(info.param.path)) + "_" + dtype_name(info.param.dtype) +
                                  "_" + reduce_name(info.param.op);
                         });

// Hand-picked floating cases whose expected values are written out, independent of any
// conversion code: NaN propagation and the signed-zero order of min/max.
class FloatSpecialValuesTest : public ::testing::TestWithParam<KernelPath> {};

TEST_P(FloatSpecialValuesTest, MinMaxPropagateNaNAndOrderSignedZeros) {
  KOLO_SKIP_IF_PATH_UNAVAILABLE(GetParam());
  KernelPathScope scope(GetParam());
  // Lengths above one vector so the vector body runs, not only the masked tail.
  constexpr size_t n = 40;
  std::vector<float> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0: a[i] = 0.0f, b[i] = -0.0f; break;
      case 1: a[i] = -0.0f, b[i] = 0.0f; break;
      case 2: a[i] = NAN, b[i] = 1.0f; break;
      case 3: a[i] = -1.0f, b[i] = NAN; break;
    }
  }
  kernels::reduce(DataType::float32, ReduceKind::min, out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) {
    if (i % 4 < 2) {
      EXPECT_TRUE(out[i] == 0.0f && std::signbit(out[i])) << "min(+0, -0) at " << i << " must be -0";
    } else {
      EXPECT_TRUE(std::isnan(out[i])) << "min with NaN at " << i;
    }
  }
  kernels::reduce(DataType::float32, ReduceKind::max, out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) {
    if (i % 4 < 2) {
      EXPECT_TRUE(out[i] == 0.0f && !std::signbit(out[i])) << "max(+0, -0) at " << i << " must be +0";
    } else {
      EXPECT_TRUE(std::isnan(out[i])) << "max with NaN at " << i;
    }
  }
  // float16: 0x3C00 = 1.0, 0x3C01 = 1 + 2^-10; their sum 2 + 2^-10 is a tie between 0x4000 (2.0,
  // even) and 0x4001, so it rounds to 0x4000. 0x3C01 + 0x3C02 = 2 + 3*2^-10 ties to 0x4002.
  const uint16_t ha[] = {0x3C00, 0x3C01, 0x7BFF, 0x0001, 0x8001};
  const uint16_t hb[] = {0x3C01, 0x3C02, 0x7BFF, 0x0001, 0x0001};
  const uint16_t want[] = {0x4000, 0x4002, 0x7C00 /* 65504 + 65504 overflows */, 0x0002, 0x0000};
  uint16_t hout[5];
  kernels::reduce(DataType::float16, ReduceKind::sum, hout, ha, hb, 5);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(hout[i], want[i]) << "float16 sum element " << i;
}

INSTANTIATE_TEST_SUITE_P(BothPaths, FloatSpecialValuesTest,
                         ::testing::Values(KernelPath::portable, KernelPath::avx512),
                         [](const ::testing::TestParamInfo<KernelPath>& info) { return path_name(info.param); });

TEST(ReduceErrors, BitwiseOpsOnFloatingTypesThrow) {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4};
  for (DataType t : all_dtypes()) {
    if (!is_floating(t)) continue;
    for (ReduceKind op : {ReduceKind::band, ReduceKind::bor, ReduceKind::bxor}) {
      EXPECT_THROW(kernels::reduce(t, op, a, a, b, 1), InvalidArgument) << dtype_name(t) << " " << reduce_name(op);
      EXPECT_THROW(kernels::reduce_inplace(t, op, a, b, 1), InvalidArgument) << dtype_name(t) << " " << reduce_name(op);
    }
  }
}

TEST(ReduceErrors, UnknownEnumValuesThrow) {
  int32_t a[1] = {1}, b[1] = {2};
  EXPECT_THROW(kernels::reduce(static_cast<DataType>(kNumDataTypes), ReduceKind::sum, a, a, b, 1), InvalidArgument);
  EXPECT_THROW(kernels::reduce_inplace(DataType::int32, static_cast<ReduceKind>(kNumReduceKinds), a, b, 1),
               InvalidArgument);
}

TEST(ReduceErrors, NullBufferWithElementsThrows) {
  int32_t a[1] = {1};
  EXPECT_THROW(kernels::reduce(DataType::int32, ReduceKind::sum, nullptr, a, a, 1), InvalidArgument);
  EXPECT_THROW(kernels::reduce_inplace(DataType::int32, ReduceKind::sum, a, nullptr, 1), InvalidArgument);
}

TEST(ReduceErrors, ZeroCountAcceptsNullBuffers) {
  EXPECT_NO_THROW(kernels::reduce(DataType::float32, ReduceKind::sum, nullptr, nullptr, nullptr, 0));
  EXPECT_NO_THROW(kernels::reduce_inplace(DataType::int8, ReduceKind::max, nullptr, nullptr, 0));
}

}  // namespace
}  // namespace kolo::test

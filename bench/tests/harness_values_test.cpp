// The value plans every benchmark program checks with (bench/common/values.hpp): reduced() must
// equal a reduction done here in the element type itself, over inputs stored in real typed
// buffers, so no input may overflow or round in any type, for every operator; and float16 and
// bfloat16 (no C++ type) must hold every input and every partial sum exactly.
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "half_float.hpp"
#include "values.hpp"

namespace kolo::bench {
namespace {

// Calls f(T{}) with the C++ type of t; false for float16 and bfloat16, which have none.
template <class F>
bool with_native_type(ElementType t, F&& f) {
  switch (t) {
    case ElementType::int8: f(static_cast<signed char>(0)); return true;
    case ElementType::uint8: f(static_cast<unsigned char>(0)); return true;
    case ElementType::int32: f(static_cast<int32_t>(0)); return true;
    case ElementType::uint32: f(static_cast<uint32_t>(0)); return true;
    case ElementType::int64: f(static_cast<int64_t>(0)); return true;
    case ElementType::uint64: f(static_cast<uint64_t>(0)); return true;
    case ElementType::float32: f(static_cast<float>(0)); return true;
    case ElementType::float64: f(static_cast<double>(0)); return true;
    case ElementType::float16:
    case ElementType::bfloat16: return false;
  }
  return false;
}

// Reduces the rank buffers in the element type T, rank by rank, the way a naive implementation
// would; if any partial result overflowed or rounded, it would differ.
template <class T>
int64_t reduce_in_type(const std::vector<std::vector<T>>& per_rank, size_t i, RedOp op) {
  T acc = per_rank[0][i];
  if (op == RedOp::premul_sum) acc = static_cast<T>(acc * static_cast<T>(kPremulFactor));
  for (size_t r = 1; r < per_rank.size(); ++r) {
    T v = per_rank[r][i];
    switch (op) {
      case RedOp::premul_sum: v = static_cast<T>(v * static_cast<T>(kPremulFactor)); [[fallthrough]];
      case RedOp::sum:
      case RedOp::avg: acc = static_cast<T>(acc + v); break;
      case RedOp::prod: acc = static_cast<T>(acc * v); break;
      case RedOp::min: acc = v < acc ? v : acc; break;
      case RedOp::max: acc = v > acc ? v : acc; break;
      case RedOp::band:
      case RedOp::bor:
      case RedOp::bxor:
        if constexpr (std::is_integral_v<T>) {
          acc = static_cast<T>(op == RedOp::band ? (acc & v) : op == RedOp::bor ? (acc | v) : (acc ^ v));
        }
        break;
    }
  }
  if (op == RedOp::avg) acc = static_cast<T>(acc / static_cast<T>(per_rank.size()));
  return static_cast<int64_t>(acc);
}

TEST(HarnessValues, ReducedMatchesAReductionInTheElementType) {
  for (ElementType type : kAllElementTypes) {
    for (RedOp op : kAllRedOps) {
      if (is_bitwise(op) && is_floating(type)) continue;  // refused on the command line
      for (int nranks : {1, 2, 3, 8}) {
        with_native_type(type, [&](auto zero) {
          using T = decltype(zero);
          constexpr size_t kCount = 2000;
          const ValuePlan plan(type, &op, nranks, 7);
          std::vector<std::vector<T>> per_rank(static_cast<size_t>(nranks), std::vector<T>(kCount));
          for (int r = 0; r < nranks; ++r)
            for (size_t i = 0; i < kCount; ++i) store_value(type, per_rank[static_cast<size_t>(r)].data(), i, plan.input(r, i));
          for (size_t i = 0; i < kCount; ++i) {
            // The stored input reads back as the planned integer: it is representable.
            ASSERT_TRUE(holds_value(type, per_rank[0].data(), i, plan.input(0, i)));
            std::vector<T> result{static_cast<T>(reduce_in_type(per_rank, i, op))};
            ASSERT_TRUE(holds_value(type, result.data(), 0, plan.reduced(i)))
                << element_name(type) << " " << redop_name(op) << " nranks " << nranks << " index " << i << ": "
                << element_text(type, result.data(), 0) << " vs " << plan.reduced(i);
          }
        });
      }
    }
  }
}

// float16 and bfloat16: every input and every partial result of a rank-by-rank sum, product,
// average or pre-multiplied sum is an integer the format holds exactly.
TEST(HarnessValues, HalfFormatsHoldEveryPartialResult) {
  for (ElementType type : {ElementType::float16, ElementType::bfloat16}) {
    const auto exact = [type](int64_t v) {
      std::vector<uint16_t> slot(1);
      store_value(type, slot.data(), 0, v);
      return holds_value(type, slot.data(), 0, v);
    };
    for (RedOp op : {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg, RedOp::premul_sum}) {
      for (int nranks : {1, 2, 3, 8}) {
        const ValuePlan plan(type, &op, nranks, 11);
        for (size_t i = 0; i < 2000; ++i) {
          const int64_t factor = op == RedOp::premul_sum ? static_cast<int64_t>(kPremulFactor) : 1;
          int64_t acc = plan.input(0, i) * factor;
          ASSERT_TRUE(exact(plan.input(0, i)) && exact(acc));
          for (int r = 1; r < nranks; ++r) {
            const int64_t v = plan.input(r, i) * factor;
            ASSERT_TRUE(exact(plan.input(r, i)) && exact(v));
            if (op == RedOp::prod) acc *= v;
            else if (op == RedOp::min) acc = v < acc ? v : acc;
            else if (op == RedOp::max) acc = v > acc ? v : acc;
            else acc += v;
            ASSERT_TRUE(exact(acc)) << element_name(type) << " " << redop_name(op) << " partial " << acc;
          }
          ASSERT_TRUE(exact(plan.reduced(i)));
        }
      }
    }
  }
}

TEST(HarnessValues, SaltAndRankChangeTheValues) {
  const RedOp sum = RedOp::sum;
  const ValuePlan a(ElementType::float32, &sum, 4, 1);
  const ValuePlan b(ElementType::float32, &sum, 4, 2);
  int same_salt = 0, same_rank = 0;
  for (size_t i = 0; i < 1000; ++i) {
    same_salt += a.input(0, i) == b.input(0, i);
    same_rank += a.input(0, i) == a.input(1, i);
  }
  // Values span millions, so more than a couple of coincidences would mean the salt is ignored.
  EXPECT_LT(same_salt, 3);
  EXPECT_LT(same_rank, 3);
}

TEST(HarnessValues, HoldsValueRejectsANeighbour) {
  std::vector<float> f(1);
  store_value(ElementType::float32, f.data(), 0, 12345);
  EXPECT_TRUE(holds_value(ElementType::float32, f.data(), 0, 12345));
  EXPECT_FALSE(holds_value(ElementType::float32, f.data(), 0, 12346));
  std::vector<signed char> c(1);
  store_value(ElementType::int8, c.data(), 0, -100);
  EXPECT_TRUE(holds_value(ElementType::int8, c.data(), 0, -100));
  EXPECT_FALSE(holds_value(ElementType::int8, c.data(), 0, 100));
  EXPECT_EQ(element_text(ElementType::int8, c.data(), 0), "-100");
  std::vector<uint16_t> h(1);
  store_value(ElementType::float16, h.data(), 0, 2047);
  EXPECT_TRUE(holds_value(ElementType::float16, h.data(), 0, 2047));
  EXPECT_EQ(half_to_float(h[0]), 2047.0f);
  EXPECT_EQ(element_text(ElementType::float16, h.data(), 0), "2047");
}

}  // namespace
}  // namespace kolo::bench

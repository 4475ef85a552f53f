// The value plans the peers check with: reduced() must equal a reduction done here in the
// element type itself, over inputs stored in real typed buffers, so no input may overflow or
// round in any type.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "peer_values.hpp"

namespace kolo::peers {
namespace {

constexpr ElementType kTypes[] = {ElementType::int8,  ElementType::uint8,  ElementType::int32,
                                  ElementType::uint32, ElementType::int64, ElementType::uint64,
                                  ElementType::float32, ElementType::float64};
constexpr ReduceKind kOps[] = {ReduceKind::sum, ReduceKind::prod, ReduceKind::min, ReduceKind::max};

// Reduces the rank buffers in the library's own type T, rank by rank, the way a naive
// implementation would; if any partial result overflowed or rounded, it would differ.
template <class T>
int64_t reduce_in_type(const std::vector<std::vector<T>>& per_rank, size_t i, ReduceKind op) {
  T acc = per_rank[0][i];
  for (size_t r = 1; r < per_rank.size(); ++r) {
    const T v = per_rank[r][i];
    switch (op) {
      case ReduceKind::sum: acc = static_cast<T>(acc + v); break;
      case ReduceKind::prod: acc = static_cast<T>(acc * v); break;
      case ReduceKind::min: acc = v < acc ? v : acc; break;
      case ReduceKind::max: acc = v > acc ? v : acc; break;
    }
  }
  return static_cast<int64_t>(acc);
}

TEST(PeerValues, ReducedMatchesAReductionInTheElementType) {
  for (ElementType type : kTypes) {
    for (ReduceKind op : kOps) {
      for (int nranks : {1, 2, 3, 8}) {
        with_element_type(type, [&](auto zero) {
          using T = decltype(zero);
          constexpr size_t kCount = 2000;
          const ValuePlan plan(type, &op, nranks, 7);
          std::vector<std::vector<T>> per_rank(static_cast<size_t>(nranks), std::vector<T>(kCount));
          for (int r = 0; r < nranks; ++r)
            for (size_t i = 0; i < kCount; ++i) store_value(type, per_rank[static_cast<size_t>(r)].data(), i, plan.input(r, i));
          for (size_t i = 0; i < kCount; ++i) {
            // The stored input reads back as the planned integer: it is representable.
            ASSERT_TRUE(holds_value(type, per_rank[0].data(), i, plan.input(0, i)));
            ASSERT_EQ(reduce_in_type(per_rank, i, op), plan.reduced(i))
                << type_name(type) << " " << op_name(op) << " nranks " << nranks << " index " << i;
          }
        });
      }
    }
  }
}

TEST(PeerValues, SaltAndRankChangeTheValues) {
  const ReduceKind sum = ReduceKind::sum;
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

TEST(PeerValues, HoldsValueRejectsANeighbour) {
  std::vector<float> f(1);
  store_value(ElementType::float32, f.data(), 0, 12345);
  EXPECT_TRUE(holds_value(ElementType::float32, f.data(), 0, 12345));
  EXPECT_FALSE(holds_value(ElementType::float32, f.data(), 0, 12346));
  std::vector<signed char> c(1);
  store_value(ElementType::int8, c.data(), 0, -100);
  EXPECT_TRUE(holds_value(ElementType::int8, c.data(), 0, -100));
  EXPECT_FALSE(holds_value(ElementType::int8, c.data(), 0, 100));
  EXPECT_EQ(element_text(ElementType::int8, c.data(), 0), "-100");
}

}  // namespace
}  // namespace kolo::peers

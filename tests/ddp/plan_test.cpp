// plan_ddp_buckets, in-process: reverse order, bucket sizes, contiguous ranges that cover every
// parameter once, parameters never split, refusal of layouts that cannot be bucketed.
#include <gtest/gtest.h>

#include <random>

#include "kolo/ddp.hpp"

namespace kolo {
namespace {

std::vector<DdpParam> layout_of(const std::vector<size_t>& counts, const std::vector<size_t>& gaps = {}) {
  std::vector<DdpParam> layout;
  size_t offset = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (i < gaps.size()) offset += gaps[i];
    std::string name = "p";  // (not "p" + to_string: GCC 12 warns falsely about that, -Wrestrict)
    name += std::to_string(i);
    layout.push_back(DdpParam{name, offset, counts[i]});
    offset += counts[i];
  }
  return layout;
}

size_t end_of(const std::vector<DdpParam>& layout) { return layout.back().offset + layout.back().count; }

DdpOptions sizes(size_t first, size_t later) {
  DdpOptions o;
  o.first_bucket_bytes = first;
  o.bucket_bytes = later;
  return o;
}

// Every property the reducer relies on, checked from the plan alone.
void expect_valid_plan(const std::vector<DdpParam>& layout, const DdpOptions& o, const std::vector<DdpBucket>& plan) {
  // Reverse order: concatenating the buckets' parameters gives n-1, n-2, ..., 0.
  std::vector<size_t> order;
  for (const DdpBucket& b : plan) order.insert(order.end(), b.params.begin(), b.params.end());
  ASSERT_EQ(order.size(), layout.size());
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(order[k], layout.size() - 1 - k);

  for (size_t b = 0; b < plan.size(); ++b) {
    const DdpBucket& bucket = plan[b];
    ASSERT_FALSE(bucket.params.empty()) << "bucket " << b;
    // The range runs from the lowest parameter to the end of the highest.
    const DdpParam& highest = layout[bucket.params.front()];
    const DdpParam& lowest = layout[bucket.params.back()];
    EXPECT_EQ(bucket.offset, lowest.offset) << "bucket " << b;
    EXPECT_EQ(bucket.offset + bucket.count, highest.offset + highest.count) << "bucket " << b;
    // Ranges of consecutive buckets do not overlap, and descend through the buffer.
    if (b > 0) {
      EXPECT_LE(bucket.offset + bucket.count, plan[b - 1].offset) << "bucket " << b;
    }
    // Size: every bucket but the last reached its limit, and closed at the first parameter that did.
    const size_t limit = b == 0 ? o.first_bucket_bytes : o.bucket_bytes;
    if (b + 1 < plan.size()) {
      EXPECT_GE(bucket.count * sizeof(float), limit) << "bucket " << b;
    }
    if (bucket.params.size() > 1) {
      const DdpParam& second_lowest = layout[bucket.params[bucket.params.size() - 2]];
      const size_t without_last = highest.offset + highest.count - second_lowest.offset;
      EXPECT_LT(without_last * sizeof(float), limit) << "bucket " << b << " should have closed one parameter earlier";
    }
  }
}

TEST(DdpPlan, ReverseOrderFirstBucketSmallLaterLarge) {
  // 100 floats = 400 bytes each: the first bucket closes at 2 parameters (800 >= 600), later
  // ones at 4 (1600 >= 1500), the last holds the remaining 2.
  const auto layout = layout_of(std::vector<size_t>(10, 100));
  const DdpOptions o = sizes(600, 1500);
  const auto plan = plan_ddp_buckets(layout, 1000, o);
  expect_valid_plan(layout, o, plan);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].params, (std::vector<size_t>{9, 8}));
  EXPECT_EQ(plan[0].offset, 800u);
  EXPECT_EQ(plan[0].count, 200u);
  EXPECT_EQ(plan[1].params, (std::vector<size_t>{7, 6, 5, 4}));
  EXPECT_EQ(plan[2].params, (std::vector<size_t>{3, 2, 1, 0}));
  EXPECT_EQ(plan[2].offset, 0u);
}

TEST(DdpPlan, ALargeParameterIsNeverSplit) {
  const auto layout = layout_of({20, 100000, 20});  // 80 bytes each side: a bucket of its own
  const auto plan = plan_ddp_buckets(layout, end_of(layout), sizes(64, 64));
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[1].params, (std::vector<size_t>{1}));
  EXPECT_EQ(plan[1].count, 100000u);
}

TEST(DdpPlan, DefaultSizesPutASmallModelInOneBucket) {
  const auto layout = layout_of({1000, 2000, 3});
  const auto plan = plan_ddp_buckets(layout, end_of(layout), DdpOptions{});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].offset, 0u);
  EXPECT_EQ(plan[0].count, 3003u);
}

TEST(DdpPlan, GapsAndEmptyParametersStayInsideContiguousRanges) {
  const auto layout = layout_of({7, 0, 513, 3, 0, 1024, 1}, {0, 0, 5, 0, 16, 3, 0});
  const DdpOptions o = sizes(1024, 2048);
  const auto plan = plan_ddp_buckets(layout, end_of(layout) + 10, o);
  expect_valid_plan(layout, o, plan);
}

TEST(DdpPlan, RandomLayoutsGiveValidAndRepeatablePlans) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> counts(1 + rng() % 40), gaps(counts.size());
    for (size_t& c : counts) c = rng() % 5 == 0 ? 0 : 1 + rng() % 3000;
    for (size_t& g : gaps) g = rng() % 4 == 0 ? rng() % 17 : 0;
    const auto layout = layout_of(counts, gaps);
    const DdpOptions o = sizes(4 + rng() % 8192, 4 + rng() % 20000);
    const auto plan = plan_ddp_buckets(layout, end_of(layout), o);
    expect_valid_plan(layout, o, plan);
    const auto again = plan_ddp_buckets(layout, end_of(layout), o);  // the same plan on every rank
    ASSERT_EQ(again.size(), plan.size());
    for (size_t b = 0; b < plan.size(); ++b) {
      EXPECT_EQ(again[b].params, plan[b].params);
      EXPECT_EQ(again[b].offset, plan[b].offset);
      EXPECT_EQ(again[b].count, plan[b].count);
    }
    if (HasFailure()) FAIL() << "trial " << trial;
  }
}

TEST(DdpPlan, EmptyLayoutHasNoBuckets) { EXPECT_TRUE(plan_ddp_buckets({}, 0, DdpOptions{}).empty()); }

TEST(DdpPlan, LayoutsThatCannotBeBucketedAreRefused) {
  const DdpOptions o;
  // Overlapping parameters.
  EXPECT_THROW(plan_ddp_buckets({{"a", 0, 10}, {"b", 5, 10}}, 20, o), InvalidArgument);
  // Not in ascending order.
  EXPECT_THROW(plan_ddp_buckets({{"a", 10, 10}, {"b", 0, 10}}, 20, o), InvalidArgument);
  // Beyond the buffers.
  EXPECT_THROW(plan_ddp_buckets({{"a", 0, 10}, {"b", 10, 11}}, 20, o), InvalidArgument);
  EXPECT_THROW(plan_ddp_buckets({{"a", SIZE_MAX, 2}}, 20, o), InvalidArgument);
  // Zero bucket sizes.
  EXPECT_THROW(plan_ddp_buckets({{"a", 0, 10}}, 10, sizes(0, 100)), InvalidArgument);
  try {
    plan_ddp_buckets({{"embed", 0, 10}, {"head", 5, 10}}, 20, o);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'head'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kolo

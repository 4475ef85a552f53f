// DistributedSampler: disjoint shards whose union is the global batch, independence of the
// number of ranks, per-epoch reshuffling, and exact continuation from a saved position.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "distributed_sampler.hpp"
#include "kolo/error.hpp"

namespace kolo::train {
namespace {

std::multiset<size_t> as_set(const std::vector<size_t>& v) { return {v.begin(), v.end()}; }

TEST(DistributedSampler, EpochOrderIsAPermutationThatChangesEveryEpoch) {
  DistributedSampler s(100, 7, 0, 1, 10);
  auto e0 = s.epoch_order(0), e1 = s.epoch_order(1);
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, DistributedSampler(100, 7, 0, 1, 10).epoch_order(0));  // same seed, same order
  EXPECT_NE(e0, DistributedSampler(100, 8, 0, 1, 10).epoch_order(0));
}

TEST(DistributedSampler, RanksTakeStridedDisjointShardsOfTheGlobalOrder) {
  const size_t n = 1000, world = 3, local = 4;
  std::vector<DistributedSampler> ranks;
  for (int r = 0; r < int(world); ++r) ranks.emplace_back(n, 42, r, int(world), world * local);
  const auto order = ranks[0].epoch_order(0);
  for (size_t step = 0; step < 5; ++step) {
    std::set<size_t> seen;
    for (size_t r = 0; r < world; ++r) {
      auto mine = ranks[r].next_step();
      ASSERT_EQ(mine.size(), local);
      for (size_t j = 0; j < local; ++j) {
        EXPECT_EQ(mine[j], order[step * world * local + r + j * world]);
        EXPECT_TRUE(seen.insert(mine[j]).second) << "sample handed to two ranks";
      }
    }
  }
}

// The property the DDP equivalence test relies on: K ranks x batch b see, step by step, the same
// samples as 1 rank x batch K*b (and as K ranks x batch b/2 x accumulation 2).
TEST(DistributedSampler, GlobalBatchIsIndependentOfTheRankCount) {
  const size_t n = 97;  // not a multiple of the batch: epochs drop the remainder
  DistributedSampler single(n, 5, 0, 1, 8);
  DistributedSampler two_a(n, 5, 0, 2, 8), two_b(n, 5, 1, 2, 8);
  for (int step = 0; step < 40; ++step) {  // several epochs
    auto whole = as_set(single.next_step());
    auto a = two_a.next_step(), b = two_b.next_step();
    ASSERT_EQ(a.size(), 4u);
    std::multiset<size_t> both(a.begin(), a.end());
    both.insert(b.begin(), b.end());
    EXPECT_EQ(whole, both) << "step " << step;
  }
  EXPECT_EQ(single.position().epoch, two_a.position().epoch);
  EXPECT_GT(single.position().epoch, 2u);
}

TEST(DistributedSampler, EpochEndsWhenAFullGlobalBatchNoLongerFits) {
  DistributedSampler s(10, 1, 0, 1, 4);
  EXPECT_EQ(s.steps_per_epoch(), 2u);
  s.next_step();
  s.next_step();
  EXPECT_EQ(s.position().epoch, 0u);
  EXPECT_EQ(s.position().next, 8u);
  auto third = s.next_step();
  EXPECT_EQ(s.position().epoch, 1u);
  EXPECT_EQ(s.position().next, 4u);
  auto order1 = s.epoch_order(1);
  EXPECT_EQ(third, std::vector<size_t>(order1.begin(), order1.begin() + 4));
}

TEST(DistributedSampler, ContinuesExactlyFromASavedPosition) {
  DistributedSampler a(50, 9, 1, 2, 6);
  for (int i = 0; i < 11; ++i) a.next_step();
  DistributedSampler b(50, 9, 1, 2, 6);
  b.set_position(a.position());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.next_step(), b.next_step()) << i;
}

// kolo-train --elastic after losing one of 4 ranks: a global batch of 16 over 3 ranks. The shares
// differ by at most one (6, 5, 5) and together are exactly the samples the 4 ranks would take.
TEST(DistributedSampler, UnevenSharesKeepTheGlobalBatch) {
  for (int step = 0; step < 3; ++step) {
    std::multiset<size_t> four, three;
    std::vector<DistributedSampler> by4, by3;
    for (int r = 0; r < 4; ++r) by4.emplace_back(200, 5, r, 4, 16);
    for (int r = 0; r < 3; ++r) by3.emplace_back(200, 5, r, 3, 16, true);
    for (int s = 0; s <= step; ++s) {
      four.clear();
      three.clear();
      for (auto& d : by4)
        for (size_t i : d.next_step()) four.insert(i);
      for (int r = 0; r < 3; ++r) {
        const std::vector<size_t> mine = by3[size_t(r)].next_step();
        EXPECT_EQ(mine.size(), r == 0 ? 6u : 5u) << "rank " << r;
        EXPECT_EQ(mine.size(), by3[size_t(r)].share());
        three.insert(mine.begin(), mine.end());
      }
    }
    EXPECT_EQ(three, four) << "step " << step;
  }
  EXPECT_THROW(DistributedSampler(100, 0, 0, 3, 2, true), InvalidArgument);  // fewer samples than ranks
}

TEST(DistributedSampler, RefusesImpossibleBatches) {
  EXPECT_THROW(DistributedSampler(100, 0, 0, 2, 5), InvalidArgument);   // not a multiple of the ranks
  EXPECT_THROW(DistributedSampler(10, 0, 0, 1, 11), InvalidArgument);   // larger than the data
  EXPECT_THROW(DistributedSampler(10, 0, 2, 2, 2), InvalidArgument);    // rank outside the world
  DistributedSampler s(10, 0, 0, 1, 2);
  EXPECT_THROW(s.set_position({0, 11}), InvalidArgument);
}

}  // namespace
}  // namespace kolo::train

// AdamW, the learning-rate schedule and gradient clipping against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "adamw.hpp"
#include "grad_clip.hpp"
#include "kolo/sharded_ddp.hpp"
#include "lr_schedule.hpp"
#include "weight_decay_policy.hpp"

namespace kolo::train {
namespace {

// First step: m = (1-b1) g, v = (1-b2) g^2; after bias correction m/sqrt(v) = sign(g), so the
// update is lr * g / (|g| + eps*...) ~ lr * sign(g), plus the decoupled decay p * lr * wd.
TEST(AdamW, FirstStepMovesEachWeightByLrAgainstItsGradient) {
  AdamWConfig cfg;
  cfg.weight_decay = 0;
  AdamW opt(4, {{0, 4, true}}, cfg);
  std::vector<float> p{1, -2, 3, 0.5f}, g{0.3f, -4, 1e-3f, 0};
  opt.step(p.data(), g.data(), 0.01f);
  EXPECT_NEAR(p[0], 1 - 0.01, 1e-6);
  EXPECT_NEAR(p[1], -2 + 0.01, 1e-6);
  EXPECT_NEAR(p[2], 3 - 0.01 * (1e-3 / (1e-3 + 1e-8)), 1e-6);
  EXPECT_EQ(p[3], 0.5f);  // zero gradient: no move
}

TEST(AdamW, DecayIsDecoupledAndOnlyOnMarkedRanges) {
  AdamWConfig cfg;
  cfg.weight_decay = 0.5f;
  AdamW opt(4, {{0, 2, true}, {2, 2, false}}, cfg);
  std::vector<float> p{2, 2, 2, 2}, g(4, 0.0f);
  opt.step(p.data(), g.data(), 0.1f);
  EXPECT_FLOAT_EQ(p[0], 2 * (1 - 0.1f * 0.5f));
  EXPECT_FLOAT_EQ(p[1], 2 * (1 - 0.1f * 0.5f));
  EXPECT_EQ(p[2], 2.0f);
  EXPECT_EQ(p[3], 2.0f);
}

// Several steps against the textbook formulas evaluated in double.
TEST(AdamW, MatchesTheReferenceFormulasOverManySteps) {
  AdamWConfig cfg{0.9f, 0.99f, 1e-8f, 0.01f};
  AdamW opt(1, {{0, 1, true}}, cfg);
  float p = 1.5f;
  double rp = 1.5, m = 0, v = 0;
  for (int t = 1; t <= 30; ++t) {
    const double g = std::sin(t) + 0.1 * rp;
    const float gf = static_cast<float>(g);
    const double lr = 0.01 * (1 + t % 3);
    opt.step(&p, &gf, static_cast<float>(lr));
    rp *= 1 - lr * 0.01;
    m = 0.9 * m + 0.1 * gf;
    v = 0.99 * v + 0.01 * double(gf) * gf;
    const double mhat = m / (1 - std::pow(0.9, t)), vhat = v / (1 - std::pow(0.99, t));
    rp -= lr * mhat / (std::sqrt(vhat) + 1e-8);
    ASSERT_NEAR(p, rp, 1e-5) << "step " << t;
  }
  EXPECT_EQ(opt.steps(), 30u);
}

// ZeRO-1's optimizer: three ranks, each an AdamW over its shard of a bucket plan (buckets with
// tails, ranges cut by shard boundaries), give the same weights, bit for bit, as one AdamW over
// everything: the update is element-wise, so only the bookkeeping of ranges and state can differ.
TEST(AdamW, ShardedOverThreeRanksEqualsTheWholeBitwise) {
  const std::vector<DecayRange> ranges{{0, 37, true}, {37, 5, false}, {42, 64, true}, {106, 3, false}};
  std::vector<kolo::DdpParam> layout;
  for (const DecayRange& r : ranges) layout.push_back({"p", r.offset, r.count});
  kolo::DdpOptions plan_options;
  plan_options.first_bucket_bytes = 30 * sizeof(float);
  plan_options.bucket_bytes = 60 * sizeof(float);
  const std::vector<kolo::DdpBucket> buckets = kolo::plan_ddp_buckets(layout, 109, plan_options);
  AdamWConfig cfg{0.9f, 0.95f, 1e-8f, 0.1f};
  AdamW whole(109, ranges, cfg);
  std::vector<float> p(109), g(109);
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::sin(0.3f * float(i));
  std::vector<std::vector<float>> rank_p(3, p);
  std::vector<AdamW> shards;
  std::vector<std::vector<kolo::ShardRange>> shard_of;
  for (int r = 0; r < 3; ++r) {
    shard_of.push_back(kolo::plan_shard(buckets, r, 3));
    size_t elements = 0;
    for (const kolo::ShardRange& s : shard_of[r]) elements += s.count;
    shards.emplace_back(elements, shard_decay_ranges(ranges, shard_of[r]), cfg);
  }
  size_t tails = 0;
  for (const kolo::ShardRange& s : shard_of[0]) tails += s.replicated;
  ASSERT_GT(tails, 0u) << "the plan must have a bucket that 3 does not divide";
  for (int t = 1; t <= 5; ++t) {
    for (size_t i = 0; i < g.size(); ++i) g[i] = std::cos(0.7f * float(i) + float(t)) * (1 + float(i % 5));
    whole.step(p.data(), g.data(), 0.01f);
    for (int r = 0; r < 3; ++r) shards[size_t(r)].step(rank_p[size_t(r)].data(), g.data(), 0.01f);
  }
  std::vector<int> owner(109, -1);
  for (int r = 2; r >= 0; --r)  // tails from rank 0, the others' chunks from their owners
    for (const kolo::ShardRange& s : shard_of[size_t(r)])
      for (size_t i = s.offset; i < s.offset + s.count; ++i) owner[i] = r;
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_GE(owner[i], 0) << "element " << i << " in no shard";
    EXPECT_EQ(rank_p[size_t(owner[i])][i], p[i]) << "element " << i;
  }
}

TEST(AdamW, MinimisesAQuadratic) {
  AdamWConfig cfg;
  cfg.weight_decay = 0;
  AdamW opt(3, {{0, 3, true}}, cfg);
  std::vector<float> p{5, -3, 1}, target{1, 2, -1}, g(3);
  for (int t = 0; t < 3000; ++t) {
    for (int i = 0; i < 3; ++i) g[i] = 2 * (p[i] - target[i]);
    opt.step(p.data(), g.data(), 0.01f);
  }
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p[i], target[i], 2e-2);
}

TEST(LrSchedule, WarmsUpLinearlyThenFollowsACosineToTheMinimum) {
  LrSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);                    // decay starts at the peak
  EXPECT_NEAR(s.at(59), 0.55, 0.01);  // about halfway: the mean of peak and minimum
  EXPECT_DOUBLE_EQ(s.at(109), 0.1);                   // the last step reaches the minimum
  EXPECT_DOUBLE_EQ(s.at(500), 0.1);
  for (uint64_t t = 10; t < 109; ++t) EXPECT_GE(s.at(t), s.at(t + 1));
  LrSchedule no_warmup{2.0, 0.0, 0, 1};
  EXPECT_DOUBLE_EQ(no_warmup.at(0), 2.0);
}

TEST(GradClip, ScalesToTheMaximumNormOnlyWhenAbove) {
  std::vector<float> g{3, 4};  // norm 5
  EXPECT_DOUBLE_EQ(global_grad_norm(g.data(), 2), 5.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(g.data(), 2, 10.0), 5.0);
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(g.data(), 2, 1.0), 5.0);
  EXPECT_NEAR(global_grad_norm(g.data(), 2), 1.0, 1e-6);
  EXPECT_NEAR(g[0] / g[1], 0.75, 1e-6);
  std::vector<float> h{30, 40};
  clip_grad_norm(h.data(), 2, 0.0);  // disabled
  EXPECT_EQ(h[1], 40.0f);
}

}  // namespace
}  // namespace kolo::train

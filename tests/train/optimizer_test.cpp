// AdamW, the learning-rate schedule and gradient clipping against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "adamw.hpp"
#include "grad_clip.hpp"
#include "lr_schedule.hpp"

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

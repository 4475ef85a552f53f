// Every layer's backward against central finite differences of its forward, in double.
// Each test builds a scalar L = sum(out * R) with random R, runs backward with dout = R, and
// checks every input and parameter gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "gradcheck.hpp"
#include "model/attention.hpp"
#include "model/cross_entropy.hpp"
#include "model/embedding.hpp"
#include "model/gelu.hpp"
#include "model/layernorm.hpp"
#include "model/linear.hpp"

namespace kolo::gpt {
namespace {

using testing::gradient_error;
using testing::random_vector;
using testing::weighted_sum;

constexpr double kTolerance = 1e-6;

TEST(LayerGradcheck, Embedding) {
  const int B = 2, T = 3, C = 4, V = 5;
  const std::vector<int> tokens = {1, 4, 1, 0, 1, 3};  // repeats: gradients must accumulate
  auto wte = random_vector(size_t(V) * C, 1), wpe = random_vector(size_t(T) * C, 2);
  const auto R = random_vector(size_t(B) * T * C, 3);
  std::vector<double> out(R.size());
  auto loss = [&] {
    embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return weighted_sum(out, R);
  };
  std::vector<double> dwte(wte.size(), 0.0), dwpe(wpe.size(), 0.0);
  embedding_backward(dwte.data(), dwpe.data(), R.data(), tokens.data(), B, T, C);
  EXPECT_LT(gradient_error(loss, wte.data(), dwte.data(), wte.size()), kTolerance);
  EXPECT_LT(gradient_error(loss, wpe.data(), dwpe.data(), wpe.size()), kTolerance);
  // Token 2 never occurs: its row gets no gradient at all.
  for (int c = 0; c < C; ++c) EXPECT_EQ(dwte[2 * C + c], 0.0);
}

TEST(LayerGradcheck, LayerNorm) {
  const int N = 3, C = 7;
  auto inp = random_vector(size_t(N) * C, 4, -2, 2), weight = random_vector(C, 5), bias = random_vector(C, 6);
  const auto R = random_vector(size_t(N) * C, 7);
  std::vector<double> out(R.size()), mean(N), rstd(N);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C);
    return weighted_sum(out, R);
  };
  loss();
  // Forward against the definition, computed independently here.
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += inp[n * C + c] / C;
    for (int c = 0; c < C; ++c) v += (inp[n * C + c] - m) * (inp[n * C + c] - m) / C;
    for (int c = 0; c < C; ++c)
      EXPECT_NEAR(out[n * C + c], (inp[n * C + c] - m) / std::sqrt(v + 1e-5) * weight[c] + bias[c], 1e-12);
  }
  std::vector<double> dinp(inp.size(), 0.0), dw(C, 0.0), db(C, 0.0);
  layernorm_backward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), weight.data(), mean.data(),
                     rstd.data(), N, C);
  EXPECT_LT(gradient_error(loss, inp.data(), dinp.data(), inp.size()), kTolerance);
  EXPECT_LT(gradient_error(loss, weight.data(), dw.data(), dw.size()), kTolerance);
  EXPECT_LT(gradient_error(loss, bias.data(), db.data(), db.size()), kTolerance);
}

void check_linear(bool with_bias) {
  const int N = 3, IC = 5, OC = 4;
  auto inp = random_vector(size_t(N) * IC, 8), weight = random_vector(size_t(OC) * IC, 9),
       bias = random_vector(OC, 10);
  const auto R = random_vector(size_t(N) * OC, 11);
  std::vector<double> out(R.size());
  const double* b = with_bias ? bias.data() : nullptr;
  auto loss = [&] {
    linear_forward(out.data(), inp.data(), weight.data(), b, N, IC, OC);
    return weighted_sum(out, R);
  };
  loss();
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double expect = with_bias ? bias[o] : 0.0;
      for (int i = 0; i < IC; ++i) expect += inp[n * IC + i] * weight[o * IC + i];
      EXPECT_NEAR(out[n * OC + o], expect, 1e-12);
    }
  }
  // Start from non-zero gradients: backward must add to them.
  std::vector<double> dinp(inp.size(), 0.5), dw(weight.size(), 0.5), db(OC, 0.5);
  linear_backward(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, R.data(), inp.data(), weight.data(), N,
                  IC, OC);
  for (auto* g : {&dinp, &dw, &db})
    for (double& x : *g) x -= 0.5;
  EXPECT_LT(gradient_error(loss, inp.data(), dinp.data(), inp.size()), kTolerance);
  EXPECT_LT(gradient_error(loss, weight.data(), dw.data(), dw.size()), kTolerance);
  if (with_bias) {
    EXPECT_LT(gradient_error(loss, bias.data(), db.data(), db.size()), kTolerance);
  } else {
    for (double x : db) EXPECT_EQ(x, 0.0);
  }
}

TEST(LayerGradcheck, LinearWithBias) { check_linear(true); }
TEST(LayerGradcheck, LinearWithoutBias) { check_linear(false); }

TEST(LayerGradcheck, Gelu) {
  const size_t n = 40;
  auto inp = random_vector(n, 12, -4, 4);
  const auto R = random_vector(n, 13);
  std::vector<double> out(n);
  auto loss = [&] {
    gelu_forward(out.data(), inp.data(), n);
    return weighted_sum(out, R);
  };
  loss();
  for (size_t i = 0; i < n; ++i) {
    const double x = inp[i];
    EXPECT_NEAR(out[i], 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x))), 1e-14);
  }
  std::vector<double> dinp(n, 0.0);
  gelu_backward(dinp.data(), inp.data(), R.data(), n);
  EXPECT_LT(gradient_error(loss, inp.data(), dinp.data(), n), kTolerance);
}

// The float path uses a rational tanh (not the library's): it must stay within float precision
// of the exact double path everywhere, including where the approximation is clamped (|u| > 9).
TEST(LayerGradcheck, FloatGeluMatchesDouble) {
  const size_t n = 20001;
  std::vector<double> xd(n), yd(n), gd(n, 0.0), ones(n, 1.0);
  std::vector<float> xf(n), yf(n), gf(n, 0.0f), onesf(n, 1.0f);
  for (size_t i = 0; i < n; ++i) xd[i] = xf[i] = float(-12.0 + 24.0 * double(i) / (n - 1));
  gelu_forward(yd.data(), xd.data(), n);
  gelu_forward(yf.data(), xf.data(), n);
  gelu_backward(gd.data(), xd.data(), ones.data(), n);
  gelu_backward(gf.data(), xf.data(), onesf.data(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(yf[i], yd[i], 1e-6 * std::max(1.0, std::abs(yd[i]))) << "gelu(" << xd[i] << ")";
    // Absolute: for x << 0 the derivative is a sum of terms near +-1 that cancel (1 + tanh u),
    // so its float error is some epsilons of those terms (observed 3.6e-6 near x = -5), not of
    // the tiny result. A wrong formula or clamp is off by 1e-3 or more.
    ASSERT_NEAR(gf[i], gd[i], 1e-5) << "gelu'(" << xd[i] << ")";
  }
}

TEST(LayerGradcheck, CausalAttention) {
  const int B = 2, T = 5, C = 8, H = 2;
  auto qkv = random_vector(size_t(B) * T * 3 * C, 14, -1.5, 1.5);
  const auto R = random_vector(size_t(B) * T * C, 15);
  std::vector<double> out(R.size()), att(size_t(B) * H * T * T);
  auto loss = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
    return weighted_sum(out, R);
  };
  loss();
  // Probabilities: rows sum to 1, nothing above the diagonal.
  for (int r = 0; r < B * H * T; ++r) {
    const int t = r % T;
    double sum = 0;
    for (int j = 0; j < T; ++j) {
      sum += att[size_t(r) * T + j];
      if (j > t) {
        EXPECT_EQ(att[size_t(r) * T + j], 0.0);
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  std::vector<double> dqkv(qkv.size(), 0.0);
  attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, H);
  EXPECT_LT(gradient_error(loss, qkv.data(), dqkv.data(), qkv.size()), kTolerance);
}

TEST(LayerGradcheck, SoftmaxCrossEntropy) {
  const int N = 4, V = 6;
  const std::vector<int> targets = {0, 5, 2, 2};
  const double scale = 1.7;
  auto logits = random_vector(size_t(N) * V, 16, -3, 3);
  std::vector<double> probs(logits.size());
  auto loss = [&] { return scale * softmax_cross_entropy_forward(probs.data(), logits.data(), targets.data(), N, V); };
  // The loss against log-sum-exp computed here.
  double expect = 0;
  for (int n = 0; n < N; ++n) {
    double z = 0;
    for (int i = 0; i < V; ++i) z += std::exp(logits[n * V + i]);
    expect += (std::log(z) - logits[n * V + targets[n]]) / N;
  }
  EXPECT_NEAR(loss(), scale * expect, 1e-12);
  EXPECT_EQ(softmax_cross_entropy_forward(probs.data(), logits.data(), nullptr, N, V), 0.0);
  std::vector<double> dlogits(logits.size(), 123.0);  // backward overwrites
  softmax_cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), N, V, scale);
  EXPECT_LT(gradient_error(loss, logits.data(), dlogits.data(), logits.size()), kTolerance);
}

}  // namespace
}  // namespace kolo::gpt

// The whole model: layout, initialisation, the full gradient against finite differences (double),
// the on_ready contract the data-parallel layer relies on, and input checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "gradcheck.hpp"
#include "model/model.hpp"

namespace kolo::gpt {
namespace {

const Config kTiny{/*vocab=*/11, /*seq=*/6, /*layers=*/2, /*heads=*/2, /*dim=*/8};

std::vector<int> random_tokens(size_t n, int vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<int> v(n);
  for (int& t : v) t = dist(gen);
  return v;
}

// GPT-2 init leaves biases at 0 and LayerNorm gains at 1; perturb everything so that the
// gradient checks exercise every parameter with generic values.
template <class Real>
void perturb(Model<Real>& m, double scale, uint32_t seed) {
  const auto noise = testing::random_vector(m.num_params(), seed, -scale, scale);
  for (size_t i = 0; i < m.num_params(); ++i) m.params()[i] += Real(noise[i]);
}

TEST(GptModel, LayoutIsContiguousInCreationOrder) {
  Model<float> m(kTiny);
  const auto& layout = m.layout();
  const size_t C = kTiny.dim, V = kTiny.vocab, S = kTiny.seq;
  const size_t per_block = 4 * C + 3 * C * C + 3 * C + C * C + C + 4 * C * C + 4 * C + 4 * C * C + C;
  EXPECT_EQ(m.num_params(), V * C + S * C + kTiny.layers * per_block + 2 * C);
  ASSERT_EQ(layout.size(), 2u + 12u * kTiny.layers + 2u);
  size_t offset = 0;
  for (const ParamInfo& p : layout) {
    EXPECT_EQ(p.offset, offset) << p.name;
    EXPECT_GT(p.count, 0u) << p.name;
    offset += p.count;
  }
  EXPECT_EQ(offset, m.num_params());
  EXPECT_EQ(layout[0].name, "wte");
  EXPECT_EQ(layout[1].name, "wpe");
  EXPECT_EQ(layout[2].name, "h.0.ln1.weight");
  EXPECT_EQ(layout[4].name, "h.0.attn.qkv.weight");
  EXPECT_EQ(layout[4].count, 3 * C * C);
  EXPECT_EQ(layout[13].name, "h.0.mlp.proj.bias");
  EXPECT_EQ(layout[14].name, "h.1.ln1.weight");
  EXPECT_EQ(layout.back().name, "lnf.bias");
}

TEST(GptModel, InitIsDeterministicAndGpt2Scaled) {
  const Config c{256, 64, 4, 4, 128};
  Model<float> a(c), b(c), other(c);
  Model<double> d(c);
  a.init(7);
  b.init(7);
  other.init(8);
  d.init(7);
  ASSERT_EQ(std::vector<float>(a.params(), a.params() + a.num_params()),
            std::vector<float>(b.params(), b.params() + b.num_params()));
  size_t differ = 0;
  for (size_t i = 0; i < a.num_params(); ++i) {
    differ += a.params()[i] != other.params()[i];
    ASSERT_EQ(a.params()[i], float(d.params()[i])) << i;  // same values in double, up to rounding
  }
  EXPECT_GT(differ, a.num_params() / 2);
  auto stddev = [&](const ParamInfo& p) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < p.count; ++i) {
      s += a.params()[p.offset + i];
      s2 += double(a.params()[p.offset + i]) * a.params()[p.offset + i];
    }
    const double mean = s / p.count;
    EXPECT_NEAR(mean, 0.0, 0.002) << p.name;
    return std::sqrt(s2 / p.count - mean * mean);
  };
  for (const ParamInfo& p : a.layout()) {
    const std::string& n = p.name;
    const float* w = a.params() + p.offset;
    if (n.ends_with(".bias")) {
      for (size_t i = 0; i < p.count; ++i) ASSERT_EQ(w[i], 0.0f) << n;
    } else if (n.ends_with("ln1.weight") || n.ends_with("ln2.weight") || n == "lnf.weight") {
      for (size_t i = 0; i < p.count; ++i) ASSERT_EQ(w[i], 1.0f) << n;
    } else if (n.ends_with("attn.proj.weight") || n.ends_with("mlp.proj.weight")) {
      EXPECT_NEAR(stddev(p), 0.02 / std::sqrt(2.0 * c.layers), 0.0005) << n;
    } else {
      EXPECT_NEAR(stddev(p), 0.02, 0.0005) << n;
    }
  }
}

TEST(GptModel, InitialLossIsNearUniform) {
  Model<float> m(Config{});
  m.init(1);
  const int B = 4, T = 64;
  const auto tokens = random_tokens(B * T, 256, 1), targets = random_tokens(B * T, 256, 2);
  EXPECT_NEAR(m.forward(tokens.data(), targets.data(), B, T), std::log(256.0), 0.05);
}

// The full model's loss gradient against finite differences, for every parameter.
TEST(GptModel, GradientMatchesFiniteDifferences) {
  Model<double> m(kTiny);
  m.init(3);
  perturb(m, 0.3, 4);
  const int B = 2, T = 5;  // T < seq: positions beyond T are unused
  const auto tokens = random_tokens(B * T, kTiny.vocab, 5), targets = random_tokens(B * T, kTiny.vocab, 6);
  const double scale = 2.5;
  m.zero_grad();
  const double loss = m.forward(tokens.data(), targets.data(), B, T);
  EXPECT_GT(loss, 0.0);
  m.backward(scale, nullptr);
  const std::vector<double> analytic(m.grads(), m.grads() + m.num_params());
  auto f = [&] { return scale * m.forward(tokens.data(), targets.data(), B, T); };
  for (const ParamInfo& p : m.layout()) {
    double* x = m.params() + p.offset;
    const double* g = analytic.data() + p.offset;
    if (p.name == "wpe") {
      // Only the first T positions are used; the rest must get exactly no gradient.
      const size_t used = size_t(T) * kTiny.dim;
      EXPECT_LT(testing::gradient_error(f, x, g, used), 1e-6) << p.name;
      for (size_t i = used; i < p.count; ++i) ASSERT_EQ(g[i], 0.0) << p.name << " row " << i / kTiny.dim;
    } else {
      EXPECT_LT(testing::gradient_error(f, x, g, p.count), 1e-6) << p.name;
    }
  }
}

// What DistributedDataParallel relies on: each parameter is announced once, in reverse layout
// order, and its gradient does not change after the announcement.
TEST(GptModel, OnReadyAnnouncesFinalGradientsInReverseOrder) {
  Model<float> m(Config{64, 16, 3, 2, 16});
  m.init(9);
  perturb(m, 0.05, 10);
  const int B = 3, T = 16;
  const auto tokens = random_tokens(B * T, 64, 11), targets = random_tokens(B * T, 64, 12);
  m.zero_grad();
  m.forward(tokens.data(), targets.data(), B, T);
  std::vector<size_t> order;
  std::vector<std::vector<float>> at_ready(m.layout().size());
  m.backward(1.0f, [&](size_t i) {
    order.push_back(i);
    const ParamInfo& p = m.layout().at(i);
    at_ready[i].assign(m.grads() + p.offset, m.grads() + p.offset + p.count);
  });
  ASSERT_EQ(order.size(), m.layout().size());
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(order[k], order.size() - 1 - k);
  for (size_t i = 0; i < m.layout().size(); ++i) {
    const ParamInfo& p = m.layout()[i];
    EXPECT_EQ(at_ready[i], std::vector<float>(m.grads() + p.offset, m.grads() + p.offset + p.count)) << p.name;
  }
}

TEST(GptModel, BackwardAddsIntoGradsAndScales) {
  Model<double> m(kTiny);
  m.init(13);
  perturb(m, 0.1, 14);
  const int B = 2, T = 6;
  const auto tokens = random_tokens(B * T, kTiny.vocab, 15), targets = random_tokens(B * T, kTiny.vocab, 16);
  m.zero_grad();
  m.forward(tokens.data(), targets.data(), B, T);
  m.backward(1.0, nullptr);
  const std::vector<double> once(m.grads(), m.grads() + m.num_params());
  m.backward(2.0, nullptr);  // accumulates: once + 2 * once
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < once.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(once[i]));
    max_diff = std::max(max_diff, std::abs(m.grads()[i] - 3 * once[i]));
  }
  EXPECT_GT(max_ref, 0.0);
  EXPECT_LT(max_diff, 1e-12 * max_ref);
  m.zero_grad();
  for (size_t i = 0; i < m.num_params(); ++i) ASSERT_EQ(m.grads()[i], 0.0);
}

// Changing the token at position t must not change any logit before t (the causal mask), and
// rows of a batch must not see each other.
TEST(GptModel, LogitsAreCausalAndRowsIndependent) {
  const Config c{32, 8, 2, 2, 16};
  Model<double> m(c);
  m.init(17);
  const int B = 2, T = 8, V = c.vocab;
  auto tokens = random_tokens(B * T, V, 18);
  m.forward(tokens.data(), nullptr, B, T);
  const std::vector<double> before(m.logits(), m.logits() + size_t(B) * T * V);
  const int t = 5;
  tokens[t] = (tokens[t] + 1) % V;  // row 0, position 5
  EXPECT_EQ(m.forward(tokens.data(), nullptr, B, T), 0.0);  // no targets: loss 0
  for (int b = 0; b < B; ++b) {
    for (int s = 0; s < T; ++s) {
      double diff = 0;
      for (int v = 0; v < V; ++v) diff = std::max(diff, std::abs(m.logits()[(size_t(b) * T + s) * V + v] -
                                                                  before[(size_t(b) * T + s) * V + v]));
      if (b == 0 && s >= t) {
        EXPECT_GT(diff, 1e-9) << "row " << b << " position " << s;
      } else {
        EXPECT_EQ(diff, 0.0) << "row " << b << " position " << s;
      }
    }
  }
  // Row 1 alone gives the same logits as row 1 within the batch.
  m.forward(tokens.data() + T, nullptr, 1, T);
  for (size_t i = 0; i < size_t(T) * V; ++i) ASSERT_NEAR(m.logits()[i], before[size_t(T) * V + i], 1e-12);
}

TEST(GptModel, RejectsBadInput) {
  EXPECT_THROW(Model<float>(Config{256, 64, 2, 3, 64}), std::invalid_argument);  // 64 % 3 != 0
  EXPECT_THROW(Model<float>(Config{256, 0, 2, 4, 64}), std::invalid_argument);
  Model<float> m(kTiny);
  m.init(1);
  std::vector<int> tokens(14, 1), targets(14, 2);
  EXPECT_THROW(m.forward(tokens.data(), targets.data(), 2, 7), std::invalid_argument);  // T > seq
  tokens[3] = kTiny.vocab;
  EXPECT_THROW(m.forward(tokens.data(), targets.data(), 2, 6), std::invalid_argument);
  tokens[3] = 0;
  targets[5] = -1;
  EXPECT_THROW(m.forward(tokens.data(), targets.data(), 2, 6), std::invalid_argument);
  m.forward(tokens.data(), nullptr, 2, 6);
  EXPECT_THROW(m.backward(1.0f, nullptr), std::logic_error);  // nothing to differentiate
}

TEST(GptModel, BlasThreadsDefaultToOne) {
  Model<float> m(kTiny);
  EXPECT_EQ(blas_threads(), 1);
  EXPECT_FALSE(blas_core_name().empty());
  EXPECT_THROW(set_blas_threads(0), std::invalid_argument);
}

}  // namespace
}  // namespace kolo::gpt

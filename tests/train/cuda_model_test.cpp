// The GPU model (examples/train/model/cuda) against the CPU model in double: the forward loss,
// the logits and every parameter's gradient (each tensor within 1e-4 of its largest gradient),
// the on_ready contract DDP relies on, accumulation, and the optimizer's passes against the
// CPU AdamW and clipping. Suite 'gpu': every test skips, saying why, without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "adamw.hpp"
#include "grad_clip.hpp"
#include "model/cuda/cuda_model.hpp"
#include "model/cuda/cuda_optim.hpp"
#include "model/model.hpp"

namespace kolo::gpt {
namespace {

#define SKIP_WITHOUT_GPU()                                                            \
  do {                                                                                \
    if (const std::string why = cuda::unavailable_reason(); !why.empty())             \
      GTEST_SKIP() << "no usable CUDA device: " << why;                               \
  } while (0)

// Sizes that exercise the kernels' edges: dim 48 and vocab 37 are not multiples of a warp, the
// 37 positions of a row span two warps' worth of keys, 3 heads of 16 channels.
const Config kSmall{/*vocab=*/37, /*seq=*/40, /*layers=*/2, /*heads=*/3, /*dim=*/48};
constexpr int kB = 3, kT = 37;

std::vector<int> random_tokens(size_t n, int vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<int> v(n);
  for (int& t : v) t = dist(gen);
  return v;
}

// GPT-2 init leaves biases at 0 and LayerNorm gains at 1: perturb everything so that every
// gradient is generic. The float model is the source; the double one gets its exact values.
void perturb(Model<float>& m, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> noise(-0.05f, 0.05f);
  for (size_t i = 0; i < m.num_params(); ++i) m.params()[i] += noise(gen);
}

struct Pair {
  Model<float> host{kSmall};
  Model<double> reference{kSmall};
  Pair() {
    host.init(11);
    perturb(host, 5);
    for (size_t i = 0; i < host.num_params(); ++i) reference.params()[i] = host.params()[i];
  }
};

// max |got - want| over a tensor, against 1e-4 of the tensor's largest |want|.
void expect_close_per_tensor(const std::vector<float>& got, const double* want, const std::vector<ParamInfo>& layout,
                             double rel) {
  for (const ParamInfo& p : layout) {
    double largest = 0, worst = 0;
    size_t worst_at = 0;
    for (size_t i = p.offset; i < p.offset + p.count; ++i) {
      largest = std::max(largest, std::fabs(want[i]));
      const double d = std::fabs(double(got[i]) - want[i]);
      if (d > worst) worst = d, worst_at = i;
    }
    EXPECT_GT(largest, 0.0) << p.name << ": no gradient at all";
    EXPECT_LE(worst, rel * largest) << p.name << ": element " << worst_at - p.offset << " is " << got[worst_at]
                                    << ", the double model's " << want[worst_at] << " (largest " << largest << ")";
  }
}

TEST(GptCuda, ForwardLossLogitsAndEveryGradientMatchTheDoubleCpuModel) {
  SKIP_WITHOUT_GPU();
  Pair m;
  CudaModel gpu(m.host, 0);
  const auto tokens = random_tokens(size_t(kB) * kT, kSmall.vocab, 1);
  const auto targets = random_tokens(size_t(kB) * kT, kSmall.vocab, 2);
  const double want = m.reference.forward(tokens.data(), targets.data(), kB, kT);
  const float got = gpu.forward(tokens.data(), targets.data(), kB, kT);
  EXPECT_NEAR(got, want, 1e-5 * want);

  const std::vector<float> logits = gpu.logits();
  ASSERT_EQ(logits.size(), size_t(kB) * kT * kSmall.vocab);
  double worst = 0;
  for (size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::fabs(logits[i] - m.reference.logits()[i]));
  EXPECT_LE(worst, 1e-5) << "logits";

  m.reference.zero_grad();
  m.reference.backward(0.75, nullptr);
  gpu.zero_grad();
  gpu.backward(0.75f, nullptr);
  std::vector<float> grads(gpu.num_params());
  gpu.download_grads(grads.data());
  expect_close_per_tensor(grads, m.reference.grads(), m.reference.layout(), 1e-4);
}

TEST(GptCuda, BackwardMarksEveryParameterOnceInDecreasingOrderAndAccumulates) {
  SKIP_WITHOUT_GPU();
  Pair m;
  CudaModel gpu(m.host, 0);
  const auto tokens = random_tokens(size_t(kB) * kT, kSmall.vocab, 3);
  const auto targets = random_tokens(size_t(kB) * kT, kSmall.vocab, 4);
  gpu.zero_grad();
  gpu.forward(tokens.data(), targets.data(), kB, kT);
  std::vector<size_t> order;
  gpu.backward(1.0f, [&](size_t i) { order.push_back(i); });
  ASSERT_EQ(order.size(), gpu.layout().size());
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(order[k], order.size() - 1 - k) << "mark #" << k;
  std::vector<float> once(gpu.num_params()), twice(gpu.num_params());
  gpu.download_grads(once.data());
  gpu.backward(1.0f, nullptr);  // adds the same gradient again
  gpu.download_grads(twice.data());
  size_t wrong = 0;
  for (size_t i = 0; i < once.size(); ++i) wrong += std::fabs(twice[i] - 2 * once[i]) > 1e-6f * (1 + std::fabs(once[i]));
  EXPECT_EQ(wrong, 0u) << "a second backward did not add the same gradient";

  // Same weights back from the device, untouched by training passes.
  std::vector<float> params(gpu.num_params());
  gpu.download_params(params.data());
  EXPECT_TRUE(std::equal(params.begin(), params.end(), m.host.params()));
  EXPECT_THROW(gpu.forward(tokens.data(), targets.data(), kB, kSmall.seq + 1), std::invalid_argument);
}

// The optimizer passes of --device cuda against the CPU trainer's (adamw.cpp, grad_clip.cpp).
TEST(GptCuda, AdamWAndTheGradientNormMatchTheCpuOptimizer) {
  SKIP_WITHOUT_GPU();
  constexpr size_t n = 100003;
  std::mt19937 gen(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> p(n), g(n);
  for (size_t i = 0; i < n; ++i) p[i] = dist(gen), g[i] = 0.01f * dist(gen);
  const double want_norm = train::global_grad_norm(g.data(), n);

  cuda::set_device(0);
  void* stream = cuda::create_stream();
  cuda::DeviceArray<float> dp(n), dg(n), dm(n), dv(n);
  cuda::upload(dp.get(), p.data(), n * sizeof(float), stream);
  cuda::upload(dg.get(), g.data(), n * sizeof(float), stream);
  cuda::zero(dm.get(), n * sizeof(float), stream);
  cuda::zero(dv.get(), n * sizeof(float), stream);
  EXPECT_NEAR(std::sqrt(cuda::sum_of_squares(dg.get(), n, stream)), want_norm, 1e-12 * want_norm);

  const train::AdamWConfig config{0.9f, 0.95f, 1e-8f, 0.1f};
  // Two ranges, one decayed, as the weight-decay policy makes them.
  train::AdamW cpu(n, {{0, n / 2, true}, {n / 2, n - n / 2, false}}, config);
  std::vector<float> cpu_p = p;
  for (int step = 1; step <= 3; ++step) {
    const float lr = 1e-3f * float(step);
    cpu.step(cpu_p.data(), g.data(), lr);
    cuda::AdamWStep s{};
    s.beta1 = config.beta1;
    s.beta2 = config.beta2;
    s.eps = config.eps;
    s.step_size = lr / float(1.0 - std::pow(double(config.beta1), step));
    s.bias_correction2_sqrt = float(std::sqrt(1.0 - std::pow(double(config.beta2), step)));
    s.shrink = 1.0f - lr * config.weight_decay;
    cuda::adamw(dp.get(), dg.get(), dm.get(), dv.get(), n / 2, s, stream);
    s.shrink = 1.0f;
    cuda::adamw(dp.get() + n / 2, dg.get() + n / 2, dm.get() + n / 2, dv.get() + n / 2, n - n / 2, s, stream);
  }
  std::vector<float> got(n);
  cuda::download(got.data(), dp.get(), n * sizeof(float), stream);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += std::fabs(got[i] - cpu_p[i]) > 1e-6f * (1 + std::fabs(cpu_p[i]));
  EXPECT_EQ(wrong, 0u) << "of " << n << " parameters differ from the CPU AdamW's";

  cuda::scale(dg.get(), n, 0.5f, stream);
  cuda::download(got.data(), dg.get(), n * sizeof(float), stream);
  wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += got[i] != 0.5f * g[i];
  EXPECT_EQ(wrong, 0u) << "scaled gradients";
  cuda::destroy_stream(stream);
}

}  // namespace
}  // namespace kolo::gpt

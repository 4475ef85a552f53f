#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "attention.hpp"
#include "cross_entropy.hpp"
#include "embedding.hpp"
#include "gelu.hpp"
#include "layernorm.hpp"
#include "linear.hpp"

namespace kolo::gpt {
namespace {

// splitmix64 + Box-Muller: a tiny generator whose output is fixed by this file alone (the
// standard library's distributions may differ between implementations), so a seed gives the
// same initial model everywhere.
class NormalRng {
 public:
  explicit NormalRng(uint64_t seed) : state_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // u1 in (0, 1] so that log(u1) is finite.
    const double u1 = (double(next_u64() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = double(next_u64() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = 6.283185307179586 * u2;
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <class Real>
void add_into(Real* dst, const Real* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

template <class Real>
void zero(std::vector<Real>& v) {
  std::fill(v.begin(), v.end(), Real(0));
}

}  // namespace

template <class Real>
Model<Real>::Model(const Config& c) : config_(c) {
  if (c.vocab < 1 || c.seq < 1 || c.layers < 1 || c.heads < 1 || c.dim < 1)
    throw std::invalid_argument("gpt::Model: vocab, seq, layers, heads and dim must all be positive");
  if (c.dim % c.heads != 0)
    throw std::invalid_argument("gpt::Model: dim " + std::to_string(c.dim) + " is not divisible by heads " +
                                std::to_string(c.heads));
  apply_default_blas_threads();
  const size_t V = c.vocab, C = c.dim;
  add_param("wte", V * C);
  add_param("wpe", size_t(c.seq) * C);
  for (int l = 0; l < c.layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    add_param(h + "ln1.weight", C);
    add_param(h + "ln1.bias", C);
    add_param(h + "attn.qkv.weight", 3 * C * C);
    add_param(h + "attn.qkv.bias", 3 * C);
    add_param(h + "attn.proj.weight", C * C);
    add_param(h + "attn.proj.bias", C);
    add_param(h + "ln2.weight", C);
    add_param(h + "ln2.bias", C);
    add_param(h + "mlp.fc.weight", 4 * C * C);
    add_param(h + "mlp.fc.bias", 4 * C);
    add_param(h + "mlp.proj.weight", 4 * C * C);
    add_param(h + "mlp.proj.bias", C);
  }
  add_param("lnf.weight", C);
  add_param("lnf.bias", C);
  const size_t total = layout_.back().offset + layout_.back().count;
  params_.assign(total, Real(0));
  grads_.assign(total, Real(0));
}

template <class Real>
void Model<Real>::add_param(std::string name, size_t count) {
  const size_t offset = layout_.empty() ? 0 : layout_.back().offset + layout_.back().count;
  layout_.push_back(ParamInfo{std::move(name), offset, count});
}

template <class Real>
void Model<Real>::init(uint64_t seed) {
  NormalRng rng(seed);
  const double std_dev = 0.02;
  // GPT-2 scales the projections that write into the residual stream so that its variance does
  // not grow with depth: 2 such writes per block.
  const double residual_std = std_dev / std::sqrt(2.0 * config_.layers);
  for (const ParamInfo& p : layout_) {
    Real* w = params_.data() + p.offset;
    if (ends_with(p.name, ".bias")) {
      std::fill(w, w + p.count, Real(0));
    } else if (ends_with(p.name, "ln1.weight") || ends_with(p.name, "ln2.weight") || p.name == "lnf.weight") {
      std::fill(w, w + p.count, Real(1));
    } else {
      const bool residual = ends_with(p.name, "attn.proj.weight") || ends_with(p.name, "mlp.proj.weight");
      const double s = residual ? residual_std : std_dev;
      for (size_t i = 0; i < p.count; ++i) w[i] = Real(s * rng.next());
    }
  }
}

template <class Real>
void Model<Real>::zero_grad() {
  zero(grads_);
}

template <class Real>
void Model<Real>::resize_activations(int B, int T) {
  act_.resize(config_, B, T);
}

template <class Real>
Real Model<Real>::forward(const int* tokens, const int* targets, int B, int T) {
  const Config& c = config_;
  if (!tokens) throw std::invalid_argument("gpt::Model::forward: tokens is null");
  if (B < 1 || T < 1 || T > c.seq)
    throw std::invalid_argument("gpt::Model::forward: need B >= 1 and 1 <= T <= seq (" + std::to_string(c.seq) +
                                "), got B=" + std::to_string(B) + " T=" + std::to_string(T));
  const size_t N = size_t(B) * T;
  for (size_t i = 0; i < N; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab || (targets && (targets[i] < 0 || targets[i] >= c.vocab)))
      throw std::invalid_argument("gpt::Model::forward: token or target at position " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(c.vocab) + ")");
  }
  B_ = B;
  T_ = T;
  has_targets_ = targets != nullptr;
  tokens_.assign(tokens, tokens + N);
  if (targets) targets_.assign(targets, targets + N);
  resize_activations(B, T);

  const int C = c.dim, H = c.heads, NN = int(N);
  embedding_forward(act_.encoded.data(), tokens, param(0), param(1), B, T, C);
  const Real* x = act_.encoded.data();
  for (int l = 0; l < c.layers; ++l) {
    const size_t lnc = size_t(l) * N * C, ln = size_t(l) * N;
    Real* ln1 = act_.ln1.data() + lnc;
    Real* qkv = act_.qkv.data() + lnc * 3;
    Real* att = act_.att.data() + size_t(l) * B * H * T * T;
    Real* atty = act_.atty.data() + lnc;
    Real* resid2 = act_.resid2.data() + lnc;
    Real* ln2 = act_.ln2.data() + lnc;
    Real* fch = act_.fch.data() + lnc * 4;
    Real* fch_gelu = act_.fch_gelu.data() + lnc * 4;
    Real* resid3 = act_.resid3.data() + lnc;

    layernorm_forward(ln1, act_.ln1_mean.data() + ln, act_.ln1_rstd.data() + ln, x, param(block_param(l, kLn1W)),
                      param(block_param(l, kLn1B)), NN, C);
    linear_forward(qkv, ln1, param(block_param(l, kQkvW)), param(block_param(l, kQkvB)), NN, C, 3 * C);
    attention_forward(atty, att, qkv, B, T, C, H);
    linear_forward(act_.scratch.data(), atty, param(block_param(l, kAttnProjW)), param(block_param(l, kAttnProjB)), NN,
                   C, C);
    std::copy(x, x + N * C, resid2);
    add_into(resid2, act_.scratch.data(), N * C);

    layernorm_forward(ln2, act_.ln2_mean.data() + ln, act_.ln2_rstd.data() + ln, resid2, param(block_param(l, kLn2W)),
                      param(block_param(l, kLn2B)), NN, C);
    linear_forward(fch, ln2, param(block_param(l, kFcW)), param(block_param(l, kFcB)), NN, C, 4 * C);
    gelu_forward(fch_gelu, fch, N * 4 * C);
    linear_forward(act_.scratch.data(), fch_gelu, param(block_param(l, kMlpProjW)), param(block_param(l, kMlpProjB)),
                   NN, 4 * C, C);
    std::copy(resid2, resid2 + N * C, resid3);
    add_into(resid3, act_.scratch.data(), N * C);
    x = resid3;
  }
  layernorm_forward(act_.lnf.data(), act_.lnf_mean.data(), act_.lnf_rstd.data(), x, param(lnf_weight()), param(lnf_bias()), NN,
                    C);
  linear_forward<Real>(act_.logits.data(), act_.lnf.data(), param(0), nullptr, NN, C, c.vocab);  // tied head
  return softmax_cross_entropy_forward(act_.probs.data(), act_.logits.data(), targets, NN, c.vocab);
}

template <class Real>
void Model<Real>::backward(Real loss_scale, const std::function<void(size_t)>& on_ready) {
  if (B_ == 0 || !has_targets_)
    throw std::logic_error("gpt::Model::backward: the last forward had no targets (nothing to differentiate)");
  const Config& c = config_;
  const int B = B_, T = T_, C = c.dim, H = c.heads, V = c.vocab, NN = B * T;
  const size_t N = size_t(NN);
  auto ready = [&](size_t i) {
    if (on_ready) on_ready(i);
  };

  // Head: loss -> logits -> lnf output (the wte gradient from here is not final yet).
  softmax_cross_entropy_backward(act_.dlogits.data(), act_.probs.data(), targets_.data(), NN, V, loss_scale);
  zero(act_.dln);
  linear_backward<Real>(act_.dln.data(), grad(0), nullptr, act_.dlogits.data(), act_.lnf.data(), param(0), NN, C, V);
  zero(act_.dresid);
  const Real* last = act_.resid3.data() + size_t(c.layers - 1) * N * C;
  layernorm_backward(act_.dresid.data(), grad(lnf_weight()), grad(lnf_bias()), act_.dln.data(), last, param(lnf_weight()),
                     act_.lnf_mean.data(), act_.lnf_rstd.data(), NN, C);
  ready(lnf_bias());
  ready(lnf_weight());

  // Blocks, last to first. act_.dresid holds the gradient of the residual stream; each residual add
  // passes it through unchanged, and each branch adds its input gradient to it.
  for (int l = c.layers - 1; l >= 0; --l) {
    const size_t lnc = size_t(l) * N * C, ln = size_t(l) * N;
    const Real* x = l == 0 ? act_.encoded.data() : act_.resid3.data() + lnc - N * C;
    const Real* ln1 = act_.ln1.data() + lnc;
    const Real* qkv = act_.qkv.data() + lnc * 3;
    const Real* att = act_.att.data() + size_t(l) * B * H * T * T;
    const Real* atty = act_.atty.data() + lnc;
    const Real* resid2 = act_.resid2.data() + lnc;
    const Real* ln2 = act_.ln2.data() + lnc;
    const Real* fch = act_.fch.data() + lnc * 4;
    const Real* fch_gelu = act_.fch_gelu.data() + lnc * 4;
    auto p = [&](BlockParam k) { return param(block_param(l, k)); };
    auto g = [&](BlockParam k) { return grad(block_param(l, k)); };
    auto ready_pair = [&](BlockParam bias, BlockParam weight) {
      ready(block_param(l, bias));
      ready(block_param(l, weight));
    };

    // MLP branch: resid3 = resid2 + mlp_proj(gelu(fc(ln2(resid2)))).
    zero(act_.dfch_gelu);
    linear_backward(act_.dfch_gelu.data(), g(kMlpProjW), g(kMlpProjB), act_.dresid.data(), fch_gelu, p(kMlpProjW), NN, 4 * C,
                    C);
    ready_pair(kMlpProjB, kMlpProjW);
    zero(act_.dfch);
    gelu_backward(act_.dfch.data(), fch, act_.dfch_gelu.data(), N * 4 * C);
    zero(act_.dln);
    linear_backward(act_.dln.data(), g(kFcW), g(kFcB), act_.dfch.data(), ln2, p(kFcW), NN, C, 4 * C);
    ready_pair(kFcB, kFcW);
    layernorm_backward(act_.dresid.data(), g(kLn2W), g(kLn2B), act_.dln.data(), resid2, p(kLn2W), act_.ln2_mean.data() + ln,
                       act_.ln2_rstd.data() + ln, NN, C);
    ready_pair(kLn2B, kLn2W);

    // Attention branch: resid2 = x + proj(attention(qkv(ln1(x)))).
    zero(act_.datty);
    linear_backward(act_.datty.data(), g(kAttnProjW), g(kAttnProjB), act_.dresid.data(), atty, p(kAttnProjW), NN, C, C);
    ready_pair(kAttnProjB, kAttnProjW);
    zero(act_.dqkv);
    attention_backward(act_.dqkv.data(), act_.datty.data(), qkv, att, B, T, C, H);
    zero(act_.dln);
    linear_backward(act_.dln.data(), g(kQkvW), g(kQkvB), act_.dqkv.data(), ln1, p(kQkvW), NN, C, 3 * C);
    ready_pair(kQkvB, kQkvW);
    layernorm_backward(act_.dresid.data(), g(kLn1W), g(kLn1B), act_.dln.data(), x, p(kLn1W), act_.ln1_mean.data() + ln,
                       act_.ln1_rstd.data() + ln, NN, C);
    ready_pair(kLn1B, kLn1W);
  }

  embedding_backward(grad(0), grad(1), act_.dresid.data(), tokens_.data(), B, T, C);
  ready(1);  // wpe
  ready(0);  // wte: both its uses (head and embedding) are in now
}

template class Model<float>;
template class Model<double>;

}  // namespace kolo::gpt

// A GPT-2 style decoder-only transformer on the CPU, llm.c style: every parameter lives in one
// flat buffer (and every gradient in a second one of the same layout), which is what the
// data-parallel layer all-reduces bucket by bucket.
//
//   x = wte[token] + wpe[position]
//   for each block:  x = x + proj(attention(ln1(x)));  x = x + mlp_proj(gelu(fc(ln2(x))))
//   logits = lnf(x) wte^T          (the output head is tied to the token embedding)
//   loss = mean cross-entropy of the logits against the next tokens
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "activations.hpp"
#include "blas.hpp"
#include "config.hpp"
#include "param_index.hpp"

namespace kolo::gpt {

// Real = float (training) or double (gradient checks). Not thread-safe: one model per thread.
template <class Real>
class Model {
 public:
  // Throws std::invalid_argument for a non-positive size or dim not divisible by heads.
  explicit Model(const Config& c);

  const Config& config() const { return config_; }
  size_t num_params() const { return params_.size(); }
  // Parameters in forward (creation) order, contiguous and in increasing offsets:
  //   wte [vocab,C], wpe [seq,C], then per block h.<l>.{ln1.weight, ln1.bias, attn.qkv.weight
  //   [3C,C], attn.qkv.bias, attn.proj.weight [C,C], attn.proj.bias, ln2.weight, ln2.bias,
  //   mlp.fc.weight [4C,C], mlp.fc.bias, mlp.proj.weight [C,4C], mlp.proj.bias}, lnf.weight, lnf.bias.
  // Weights are [out, in] as in torch.nn.Linear.
  const std::vector<ParamInfo>& layout() const { return layout_; }
  Real* params() { return params_.data(); }
  const Real* params() const { return params_.data(); }
  Real* grads() { return grads_.data(); }
  const Real* grads() const { return grads_.data(); }

  // GPT-2 initialisation, deterministic for a seed (same values for float and double, up to
  // rounding): weights and embeddings N(0, 0.02), the two residual projections of every block
  // N(0, 0.02 / sqrt(2 * layers)), biases 0, LayerNorm weights 1.
  void init(uint64_t seed);

  // tokens, targets: [B,T] row-major, 1 <= T <= config().seq, values in [0, vocab). Returns the
  // mean cross-entropy over the B*T positions; with targets null it returns 0 (logits are still
  // computed, and backward is not allowed). Throws std::invalid_argument on bad input.
  Real forward(const int* tokens, const int* targets, int B, int T);
  const Real* logits() const { return act_.logits.data(); }  // [B,T,vocab] of the last forward
  int last_batch() const { return B_; }
  int last_seq() const { return T_; }

  // Backward of the last forward for loss * loss_scale; ADDS into grads(). Calls on_ready(i)
  // (if set) for every parameter i once its gradient is final, in strictly decreasing i (reverse
  // layout order), block by block while earlier blocks are still to be computed; wpe and wte come
  // last (wte, tied to the head, is only final after the embedding backward).
  // Throws std::logic_error if the last forward had no targets.
  void backward(Real loss_scale, const std::function<void(size_t)>& on_ready);
  void zero_grad();

 private:
  size_t lnf_weight() const { return gpt::lnf_weight(config_); }
  size_t lnf_bias() const { return gpt::lnf_bias(config_); }
  Real* param(size_t i) { return params_.data() + layout_[i].offset; }
  Real* grad(size_t i) { return grads_.data() + layout_[i].offset; }

  void add_param(std::string name, size_t count);
  void resize_activations(int B, int T);

  Config config_;
  std::vector<ParamInfo> layout_;
  std::vector<Real> params_, grads_;

  // Activations of the last forward (per-block ones stacked [layers, ...]).
  int B_ = 0, T_ = 0;
  bool has_targets_ = false;
  std::vector<int> tokens_, targets_;
  Activations<std::vector<Real>> act_;
};

extern template class Model<float>;
extern template class Model<double>;

}  // namespace kolo::gpt

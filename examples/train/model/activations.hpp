// The activations of one forward pass and the activation gradients of its backward, shaped once
// for both models: Model<Real> keeps them in std::vector<Real>, CudaModel in device arrays
// (cuda::DeviceArray<float>). Per-block ones are stacked [layers, ...]; N = B*T positions,
// C = dim, V = vocab, H = heads.
#pragma once
#include <cstddef>

#include "config.hpp"

namespace kolo::gpt {

template <class Array>
struct Activations {
  Array encoded;                     // [N,C] embedding output
  Array ln1, ln1_mean, ln1_rstd;     // [L,N,C], [L,N], [L,N]
  Array qkv;                         // [L,N,3C]
  Array att;                         // [L,B,H,T,T] attention probabilities
  Array atty;                        // [L,N,C] attention output before projection
  Array resid2;                      // [L,N,C] x after the attention residual
  Array ln2, ln2_mean, ln2_rstd;     // [L,N,C], [L,N], [L,N]
  Array fch, fch_gelu;               // [L,N,4C] MLP hidden before/after GELU
  Array resid3;                      // [L,N,C] block output
  Array lnf, lnf_mean, lnf_rstd;     // [N,C], [N], [N]
  Array logits, probs;               // [N,V]
  Array scratch;                     // [N,C] projection output before the residual add
  // Gradients of activations, reused by every block during backward.
  Array dresid, dln, datty;          // [N,C]
  Array dqkv;                        // [N,3C]
  Array dfch, dfch_gelu;             // [N,4C]
  Array dlogits;                     // [N,V]

  void resize(const Config& config, int B, int T) {
    const size_t N = size_t(B) * T, C = config.dim, L = config.layers, V = config.vocab, H = config.heads;
    encoded.resize(N * C);
    ln1.resize(L * N * C);
    ln1_mean.resize(L * N);
    ln1_rstd.resize(L * N);
    qkv.resize(L * N * 3 * C);
    att.resize(L * B * H * T * T);
    atty.resize(L * N * C);
    resid2.resize(L * N * C);
    ln2.resize(L * N * C);
    ln2_mean.resize(L * N);
    ln2_rstd.resize(L * N);
    fch.resize(L * N * 4 * C);
    fch_gelu.resize(L * N * 4 * C);
    resid3.resize(L * N * C);
    lnf.resize(N * C);
    lnf_mean.resize(N);
    lnf_rstd.resize(N);
    logits.resize(N * V);
    probs.resize(N * V);
    scratch.resize(N * C);
    dresid.resize(N * C);
    dln.resize(N * C);
    datty.resize(N * C);
    dqkv.resize(N * 3 * C);
    dfch.resize(N * 4 * C);
    dfch_gelu.resize(N * 4 * C);
    dlogits.resize(N * V);
  }
};

}  // namespace kolo::gpt

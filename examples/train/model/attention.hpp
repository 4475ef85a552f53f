// Causal multi-head self-attention core (between the qkv projection and the output projection).
// For every batch row b and head h, with hs = C / H and Q, K, V the head's slices of qkv:
//   att = softmax(Q K^T / sqrt(hs), masked so that position t sees positions <= t);  out = att V.
#pragma once

namespace kolo::gpt {

// qkv: [B,T,3C] laid out as [Q | K | V] per position, each C = H * hs wide (head h at h*hs).
// out: [B,T,C] (heads side by side, ready for the output projection).
// att: [B,H,T,T], the softmax probabilities (zero above the diagonal), kept for backward.
template <class Real>
void attention_forward(Real* out, Real* att, const Real* qkv, int B, int T, int C, int H);

// ADDS into dqkv [B,T,3C].
template <class Real>
void attention_backward(Real* dqkv, const Real* dout, const Real* qkv, const Real* att, int B, int T, int C, int H);

}  // namespace kolo::gpt

// Token + learned position embedding: x[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
#pragma once

namespace kolo::gpt {

// out: [B,T,C]; tokens: [B,T] (each in [0, vocab), checked by the model); wte: [vocab,C];
// wpe: [seq,C] with T <= seq.
template <class Real>
void embedding_forward(Real* out, const int* tokens, const Real* wte, const Real* wpe, int B, int T, int C);

// ADDS the gradients of the two tables: every position scatters its output gradient into the
// row of its token and the row of its position.
template <class Real>
void embedding_backward(Real* dwte, Real* dwpe, const Real* dout, const int* tokens, int B, int T, int C);

}  // namespace kolo::gpt

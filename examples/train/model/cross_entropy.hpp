// Softmax over the vocabulary followed by the mean cross-entropy against target tokens.
#pragma once

namespace kolo::gpt {

// logits, probs: [N,V]. Writes probs = softmax(logits) per row. Returns the mean over the N rows
// of -log probs[row, targets[row]], or 0 when targets is null.
template <class Real>
Real softmax_cross_entropy_forward(Real* probs, const Real* logits, const int* targets, int N, int V);

// Gradient of scale * (mean loss) w.r.t. the logits: dlogits = (probs - onehot(target)) * scale / N.
// WRITES dlogits (it is the first gradient of the backward pass).
template <class Real>
void softmax_cross_entropy_backward(Real* dlogits, const Real* probs, const int* targets, int N, int V, Real scale);

}  // namespace kolo::gpt

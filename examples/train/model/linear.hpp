// Fully connected layer (torch.nn.Linear layout): out[N,OC] = inp[N,IC] * weight[OC,IC]^T + bias.
// Also the tied output head (weight = the token embedding, no bias).
#pragma once

namespace kolo::gpt {

// bias may be null (no bias).
template <class Real>
void linear_forward(Real* out, const Real* inp, const Real* weight, const Real* bias, int N, int IC, int OC);

// ADDS into dinp [N,IC], dweight [OC,IC] and dbias [OC] (dbias null when there is no bias).
template <class Real>
void linear_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                     const Real* weight, int N, int IC, int OC);

}  // namespace kolo::gpt

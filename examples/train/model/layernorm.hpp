// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + 1e-5) * weight + bias, with the
// biased variance, exactly as torch.nn.LayerNorm.
#pragma once

namespace kolo::gpt {

inline constexpr double kLayerNormEps = 1e-5;

// inp, out: [N,C]; weight, bias: [C]. Saves each row's mean and 1/std ([N] each) for backward.
template <class Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C);

// ADDS into dinp [N,C], dweight [C] and dbias [C].
template <class Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, const Real* mean, const Real* rstd, int N, int C);

}  // namespace kolo::gpt

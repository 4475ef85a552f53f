#include "layernorm.hpp"

#include <cmath>
#include <cstddef>

namespace kolo::gpt {

template <class Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const Real* x = inp + size_t(n) * C;
    Real* y = out + size_t(n) * C;
    // Two passes (mean, then variance about it): steadier than E[x^2] - E[x]^2 in float.
    Real m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    Real var = 0;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= C;
    const Real s = Real(1) / std::sqrt(var + Real(kLayerNormEps));
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <class Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, const Real* mean, const Real* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const Real* x = inp + size_t(n) * C;
    const Real* dy = dout + size_t(n) * C;
    Real* dx = dinp + size_t(n) * C;
    const Real m = mean[n], s = rstd[n];
    // With xhat = (x - mean) * rstd and g = dy * weight (the gradient w.r.t. xhat):
    //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    Real g_mean = 0, g_xhat_mean = 0;
    for (int c = 0; c < C; ++c) {
      const Real xhat = (x[c] - m) * s;
      const Real g = dy[c] * weight[c];
      g_mean += g;
      g_xhat_mean += g * xhat;
    }
    g_mean /= C;
    g_xhat_mean /= C;
    for (int c = 0; c < C; ++c) {
      const Real xhat = (x[c] - m) * s;
      const Real g = dy[c] * weight[c];
      dbias[c] += dy[c];
      dweight[c] += xhat * dy[c];
      dx[c] += s * (g - g_mean - xhat * g_xhat_mean);
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int, int);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                        int, int);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, int, int);
template void layernorm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, int, int);

}  // namespace kolo::gpt

#include "attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "blas.hpp"

namespace kolo::gpt {

// Every head is three small GEMMs on strided views of qkv (row stride 3C): no copies.
template <class Real>
void attention_forward(Real* out, Real* att, const Real* qkv, int B, int T, int C, int H) {
  const int hs = C / H;
  const int C3 = 3 * C;
  const Real scale = Real(1) / std::sqrt(Real(hs));
  for (int b = 0; b < B; ++b) {
    const Real* q_b = qkv + size_t(b) * T * C3;
    for (int h = 0; h < H; ++h) {
      const Real* q = q_b + h * hs;
      const Real* k = q + C;
      const Real* v = q + 2 * C;
      Real* p = att + (size_t(b) * H + h) * T * T;
      // scores = scale * Q K^T (the masked upper triangle is computed too, then overwritten)
      gemm(false, true, T, T, hs, scale, q, C3, k, C3, Real(0), p, T);
      for (int t = 0; t < T; ++t) {
        Real* row = p + size_t(t) * T;
        const Real mx = *std::max_element(row, row + t + 1);
        Real sum = 0;
        for (int j = 0; j <= t; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const Real inv = Real(1) / sum;
        for (int j = 0; j <= t; ++j) row[j] *= inv;
        for (int j = t + 1; j < T; ++j) row[j] = 0;  // causal mask
      }
      gemm(false, false, T, hs, T, Real(1), p, T, v, C3, Real(0), out + size_t(b) * T * C + h * hs, C);
    }
  }
}

template <class Real>
void attention_backward(Real* dqkv, const Real* dout, const Real* qkv, const Real* att, int B, int T, int C, int H) {
  const int hs = C / H;
  const int C3 = 3 * C;
  const Real scale = Real(1) / std::sqrt(Real(hs));
  std::vector<Real> dp(size_t(T) * T);  // gradient w.r.t. the probabilities, then the scores
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const size_t head = size_t(b) * T * C3 + h * hs;
      const Real* q = qkv + head;
      const Real* k = q + C;
      const Real* v = q + 2 * C;
      Real* dq = dqkv + head;
      Real* dk = dq + C;
      Real* dv = dq + 2 * C;
      const Real* p = att + (size_t(b) * H + h) * T * T;
      const Real* dy = dout + size_t(b) * T * C + h * hs;
      gemm(false, true, T, T, hs, Real(1), dy, C, v, C3, Real(0), dp.data(), T);  // dP = dOut V^T
      gemm(true, false, T, hs, T, Real(1), p, T, dy, C, Real(1), dv, C3);         // dV += P^T dOut
      // Softmax backward, row by row: dS = P * (dP - sum_j P dP). Masked entries have P = 0,
      // so they get dS = 0 and contribute nothing below.
      for (int t = 0; t < T; ++t) {
        const Real* pr = p + size_t(t) * T;
        Real* dr = dp.data() + size_t(t) * T;
        Real dot = 0;
        for (int j = 0; j <= t; ++j) dot += pr[j] * dr[j];
        for (int j = 0; j < T; ++j) dr[j] = pr[j] * (dr[j] - dot);
      }
      gemm(false, false, T, hs, T, scale, dp.data(), T, k, C3, Real(1), dq, C3);  // dQ += scale dS K
      gemm(true, false, T, hs, T, scale, dp.data(), T, q, C3, Real(1), dk, C3);   // dK += scale dS^T Q
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, int, int, int, int);
template void attention_backward<double>(double*, const double*, const double*, const double*, int, int, int, int);

}  // namespace kolo::gpt

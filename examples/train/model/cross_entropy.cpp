#include "cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kolo::gpt {

template <class Real>
Real softmax_cross_entropy_forward(Real* probs, const Real* logits, const int* targets, int N, int V) {
  double loss_sum = 0;  // N terms: accumulate in double so the float mean does not drift
  for (int n = 0; n < N; ++n) {
    const Real* z = logits + size_t(n) * V;
    Real* p = probs + size_t(n) * V;
    const Real mx = *std::max_element(z, z + V);  // subtract the max: exp never overflows
    Real sum = 0;
    for (int i = 0; i < V; ++i) {
      p[i] = std::exp(z[i] - mx);
      sum += p[i];
    }
    const Real inv = Real(1) / sum;
    for (int i = 0; i < V; ++i) p[i] *= inv;
    // -log softmax(z)[y] = log(sum) + mx - z[y]: exact even when the probability underflows.
    if (targets) loss_sum += double(std::log(sum) + mx - z[targets[n]]);
  }
  return targets ? Real(loss_sum / N) : Real(0);
}

template <class Real>
void softmax_cross_entropy_backward(Real* dlogits, const Real* probs, const int* targets, int N, int V, Real scale) {
  const Real f = scale / Real(N);
  for (int n = 0; n < N; ++n) {
    const Real* p = probs + size_t(n) * V;
    Real* d = dlogits + size_t(n) * V;
    for (int i = 0; i < V; ++i) d[i] = p[i] * f;
    d[targets[n]] -= f;
  }
}

template float softmax_cross_entropy_forward<float>(float*, const float*, const int*, int, int);
template double softmax_cross_entropy_forward<double>(double*, const double*, const int*, int, int);
template void softmax_cross_entropy_backward<float>(float*, const float*, const int*, int, int, float);
template void softmax_cross_entropy_backward<double>(double*, const double*, const int*, int, int, double);

}  // namespace kolo::gpt

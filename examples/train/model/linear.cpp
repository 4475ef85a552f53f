#include "linear.hpp"

#include <cstddef>

#include "blas.hpp"

namespace kolo::gpt {

template <class Real>
void linear_forward(Real* out, const Real* inp, const Real* weight, const Real* bias, int N, int IC, int OC) {
  // Start every row from the bias so that one GEMM with beta = 1 finishes the job.
  for (int n = 0; n < N; ++n) {
    Real* o = out + size_t(n) * OC;
    for (int j = 0; j < OC; ++j) o[j] = bias ? bias[j] : Real(0);
  }
  gemm(false, true, N, OC, IC, Real(1), inp, IC, weight, IC, Real(1), out, OC);
}

template <class Real>
void linear_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                     const Real* weight, int N, int IC, int OC) {
  gemm(false, false, N, IC, OC, Real(1), dout, OC, weight, IC, Real(1), dinp, IC);   // dinp += dout W
  gemm(true, false, OC, IC, N, Real(1), dout, OC, inp, IC, Real(1), dweight, IC);    // dW += dout^T inp
  if (dbias) {
    for (int n = 0; n < N; ++n) {
      const Real* d = dout + size_t(n) * OC;
      for (int j = 0; j < OC; ++j) dbias[j] += d[j];
    }
  }
}

template void linear_forward<float>(float*, const float*, const float*, const float*, int, int, int);
template void linear_forward<double>(double*, const double*, const double*, const double*, int, int, int);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, int, int,
                                     int);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*, int,
                                      int, int);

}  // namespace kolo::gpt

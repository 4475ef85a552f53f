#include "embedding.hpp"

#include <cstddef>

namespace kolo::gpt {

template <class Real>
void embedding_forward(Real* out, const int* tokens, const Real* wte, const Real* wpe, int B, int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const size_t row = size_t(b) * T + t;
      const Real* tok = wte + size_t(tokens[row]) * C;
      const Real* pos = wpe + size_t(t) * C;
      Real* o = out + row * C;
      for (int c = 0; c < C; ++c) o[c] = tok[c] + pos[c];
    }
  }
}

template <class Real>
void embedding_backward(Real* dwte, Real* dwpe, const Real* dout, const int* tokens, int B, int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const size_t row = size_t(b) * T + t;
      const Real* d = dout + row * C;
      Real* dtok = dwte + size_t(tokens[row]) * C;
      Real* dpos = dwpe + size_t(t) * C;
      for (int c = 0; c < C; ++c) {
        dtok[c] += d[c];
        dpos[c] += d[c];
      }
    }
  }
}

template void embedding_forward<float>(float*, const int*, const float*, const float*, int, int, int);
template void embedding_forward<double>(double*, const int*, const double*, const double*, int, int, int);
template void embedding_backward<float>(float*, float*, const float*, const int*, int, int, int);
template void embedding_backward<double>(double*, double*, const double*, const int*, int, int, int);

}  // namespace kolo::gpt

// GELU, tanh approximation (GPT-2, torch's approximate='tanh'):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once

#include <cstddef>

namespace kolo::gpt {

template <class Real>
void gelu_forward(Real* out, const Real* inp, size_t n);

// ADDS gelu'(inp) * dout into dinp.
template <class Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, size_t n);

}  // namespace kolo::gpt

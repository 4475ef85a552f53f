// Shared by the DDP worker scenarios: a made-up model (odd parameter sizes, one padding gap,
// one empty parameter), the gradient every rank produces, and the reference average computed
// independently of kolo.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/kolo.hpp"

namespace kolo::ddptest {

// Parameters in forward order; contiguous except for a 5-element gap before "head.w".
std::vector<DdpParam> model_layout();
size_t model_total(const std::vector<DdpParam>& layout);
// Small buckets so that the model spans several: ~2 KiB first, ~6 KiB later.
DdpOptions model_options();

// Rank r's gradient element i at step s. Multiples of 1/8 of modest size: sums over ranks are
// exact in float32, so the average has a single rounding (the division) and can be compared
// exactly. `smooth` values are not representable in 16-bit floats (for the compression tests).
float exact_grad(int rank, size_t i, int step);
float smooth_grad(int rank, size_t i, int step);
// rank 0's initial parameter value, and another rank's (which the broadcast must overwrite).
float initial_param(int rank, size_t i);

// Reference average over `world` ranks of sum_{s in steps} grad(r, i, s), computed in double and
// rounded once (exact for exact_grad).
template <class Grad>
float reference_mean(Grad grad, int world, size_t i, const std::vector<int>& steps) {
  double sum = 0;
  for (int r = 0; r < world; ++r) {
    float local = 0;  // the rank's own accumulation, in float32 as backward would do it
    for (int s : steps) local += grad(r, i, s);
    sum += local;
  }
  return static_cast<float>(sum / world);
}

// Whether element i lies inside some parameter (gap elements are averaged too, but the tests
// leave them alone).
std::vector<uint8_t> covered_elements(const std::vector<DdpParam>& layout, size_t total);

}  // namespace kolo::ddptest

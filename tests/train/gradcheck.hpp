// Central finite differences for the layer and model gradient tests (double precision).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace kolo::gpt::testing {

// Fills v with uniform values in [lo, hi) from a seeded generator (tests stay reproducible).
inline std::vector<double> random_vector(size_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

// Compares `analytic` (the backward's gradient of loss() w.r.t. x) with central differences,
// (loss(x + h e_i) - loss(x - h e_i)) / 2h for every element i (or every `stride`-th one).
// Returns max_i |analytic_i - numeric_i| / max_i |numeric_i|: a relative error for the tensor as
// a whole, so that elements whose gradient is (nearly) zero do not dominate.
inline double gradient_error(const std::function<double()>& loss, double* x, const double* analytic, size_t n,
                             size_t stride = 1, double h = 1e-6) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < n; i += stride) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * h);
    max_diff = std::max(max_diff, std::abs(analytic[i] - numeric));
    max_ref = std::max(max_ref, std::abs(numeric));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

// sum_i out[i] * weights[i]: a scalar whose gradient w.r.t. out is `weights`.
inline double weighted_sum(const std::vector<double>& out, const std::vector<double>& weights) {
  double s = 0;
  for (size_t i = 0; i < out.size(); ++i) s += out[i] * weights[i];
  return s;
}

}  // namespace kolo::gpt::testing

// The ring all-reduce's schedule (Algo::kRing): which chunk each rank touches at each step and
// where it reads it from. Host-only and without CUDA, so that the kernels' caller
// (ipc_ring.cpp), the cost model's byte count (ipc_cost_model.cpp) and a CPU test that runs the
// schedule under random interleavings (tests/cuda_ipc/ring_schedule_test.cpp) share one copy.
//
// Rank r of P, left neighbour l = r - 1 (mod P), steps g = 0 .. 2 P - 3:
//   reduce-scatter, g < P - 1:  chunk c = r - 1 - g:        out_r[c] = in_r[c] + (g == 0 ? in_l[c] : out_l[c])
//   all-gather,     g >= P - 1: chunk c = r - (g - P + 1):  out_r[c] = out_l[c]
// Step g > 0 may start once l has finished step g - 1 (the one wait of a step).
#pragma once
#include <algorithm>
#include <cstddef>

namespace kolo::cuda_ipc {

struct RingStep {
  int chunk;
  bool sum;         // reduce-scatter (own input + the left's); otherwise a copy of the left's output
  bool left_input;  // the left neighbour's input (the first step), not its output
};

inline int ring_steps(int P) { return P > 1 ? 2 * (P - 1) : 0; }

inline RingStep ring_step(int rank, int P, int g) {
  auto mod = [P](int x) { return ((x % P) + P) % P; };
  if (g < P - 1) return {mod(rank - 1 - g), true, g == 0};
  return {mod(rank - (g - (P - 1))), false, false};
}

// The P chunks of `count` elements, cut as two-shot cuts its slices: ceil(count / P) rounded up
// to `width` elements (16 bytes: every chunk of a 16-byte aligned buffer starts aligned, so the
// sum kernel's vector path holds), the last ones short or empty.
struct RingChunks {
  size_t count, slice;
  RingChunks(size_t count_, int P, size_t width) : count(count_) {
    const size_t per = (count_ + P - 1) / P;
    slice = (per + width - 1) / width * width;
  }
  size_t begin(int c) const { return std::min(count, static_cast<size_t>(c) * slice); }
  size_t size(int c) const { return begin(c + 1) - begin(c); }
};

}  // namespace kolo::cuda_ipc

// Where each parameter sits in the models' flat layout (Model's add_param order, which
// CudaModel copies): wte and wpe first, then each block's twelve, then the final LayerNorm's
// weight and bias. One definition for both models, so that their layouts cannot drift apart.
#pragma once
#include <cstddef>

#include "config.hpp"

namespace kolo::gpt {

// Indexes into the layout of the parameters of one block, in creation order.
enum BlockParam : size_t {
  kLn1W, kLn1B, kQkvW, kQkvB, kAttnProjW, kAttnProjB, kLn2W, kLn2B, kFcW, kFcB, kMlpProjW, kMlpProjB,
  kParamsPerBlock
};
inline size_t block_param(int layer, BlockParam p) { return 2 + size_t(layer) * kParamsPerBlock + p; }
inline size_t lnf_weight(const Config& c) { return 2 + size_t(c.layers) * kParamsPerBlock; }
inline size_t lnf_bias(const Config& c) { return lnf_weight(c) + 1; }

}  // namespace kolo::gpt

// Shape of the GPT-style model and the description of one parameter tensor.
#pragma once

#include <cstddef>
#include <string>

namespace kolo::gpt {

// A decoder-only transformer over bytes (vocab 256 by default). `seq` is the longest context
// (the size of the learned position table); `dim` must be divisible by `heads`.
struct Config {
  int vocab = 256;
  int seq = 64;
  int layers = 2;
  int heads = 4;
  int dim = 64;
};

// One parameter tensor: the element range [offset, offset+count) of the flat buffers. Same
// shape as kolo::DdpParam (include/kolo/ddp.hpp), so the trainer converts field by field.
struct ParamInfo {
  std::string name;
  size_t offset = 0;
  size_t count = 0;
};

}  // namespace kolo::gpt

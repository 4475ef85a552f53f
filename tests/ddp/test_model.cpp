#include "test_model.hpp"

#include <cmath>

namespace kolo::ddptest {

std::vector<DdpParam> model_layout() {
  const std::vector<std::pair<std::string, size_t>> shapes = {
      {"embed.w", 1031}, {"h.0.attn.w", 517}, {"h.0.attn.b", 3},  {"h.0.norm.g", 0}, {"h.0.mlp.w", 1999},
      {"h.1.attn.w", 511}, {"h.1.attn.b", 7}, {"h.1.mlp.w", 1201}, {"head.w", 257},   {"head.b", 1},
  };
  std::vector<DdpParam> layout;
  size_t offset = 0;
  for (const auto& [name, count] : shapes) {
    if (name == "head.w") offset += 5;  // padding, as an aligning allocator would leave
    layout.push_back(DdpParam{name, offset, count});
    offset += count;
  }
  return layout;
}

size_t model_total(const std::vector<DdpParam>& layout) {
  return layout.back().offset + layout.back().count + 3;  // a tail outside every parameter
}

DdpOptions model_options() {
  DdpOptions o;
  o.first_bucket_bytes = 2048;
  o.bucket_bytes = 6144;
  o.timeout = std::chrono::milliseconds(30000);
  return o;
}

float exact_grad(int rank, size_t i, int step) {
  const long v = static_cast<long>((i * 7 + static_cast<size_t>(rank) * 131 + static_cast<size_t>(step) * 17) % 203) - 101;
  return static_cast<float>(v) * 0.125f + static_cast<float>(rank);
}

float smooth_grad(int rank, size_t i, int step) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank + 0.7 * step) * (1.5 + rank) +
                            0.001 * static_cast<double>(i % 13));
}

float initial_param(int rank, size_t i) { return static_cast<float>(rank) * 1000.0f + static_cast<float>(i) * 0.5f; }

std::vector<uint8_t> covered_elements(const std::vector<DdpParam>& layout, size_t total) {
  std::vector<uint8_t> covered(total, 0);
  for (const DdpParam& p : layout)
    for (size_t i = p.offset; i < p.offset + p.count; ++i) covered[i] = 1;
  return covered;
}

}  // namespace kolo::ddptest

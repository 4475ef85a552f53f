// AdamW (Loshchilov & Hutter): Adam with weight decay decoupled from the gradient, computed as
// torch.optim.AdamW does. Weight decay applies only to the element ranges marked for it (the
// 2-D weight matrices, see weight_decay_policy.hpp); biases and LayerNorm gains are not decayed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kolo::train {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// An element range of the flat parameter buffer, whether it is decayed, and where its moments
// lie in the optimizer state. By default at the same offset (the state mirrors the parameters);
// a sharded optimizer (ZeRO-1) keeps only its shard's moments, packed, so it says where.
struct DecayRange {
  static constexpr size_t kAtOffset = SIZE_MAX;
  size_t offset = 0;
  size_t count = 0;
  bool decay = false;
  size_t state_offset = kAtOffset;
  size_t state_begin() const { return state_offset == kAtOffset ? offset : state_offset; }
};

class AdamW {
 public:
  // `ranges` cover the parameters to update; elements outside every range are left alone.
  // `state_size`: the length of each moment vector (the parameter count, or a shard's size).
  AdamW(size_t state_size, std::vector<DecayRange> ranges, AdamWConfig config);

  // One update with learning rate `lr` from the gradients `grads` (already averaged and clipped).
  void step(float* params, const float* grads, float lr);

  // State for checkpoints: the number of steps taken and both moment estimates.
  uint64_t steps() const { return steps_; }
  std::vector<float>& first_moment() { return m_; }
  std::vector<float>& second_moment() { return v_; }
  void set_steps(uint64_t steps) { steps_ = steps; }
  size_t state_size() const { return m_.size(); }  // elements per moment

 private:
  std::vector<DecayRange> ranges_;
  AdamWConfig config_;
  uint64_t steps_ = 0;
  std::vector<float> m_;
  std::vector<float> v_;
};

}  // namespace kolo::train

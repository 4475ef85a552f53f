// A small, portable random number generator (xoshiro256**, seeded through splitmix64) whose whole
// state is four integers: it is saved in checkpoints so that a resumed run draws the same numbers,
// and it gives the same sequence on every platform (std::mt19937's distributions do not).
#pragma once
#include <array>
#include <cstdint>

namespace kolo::train {

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed = 0) {
    for (uint64_t& word : state_) word = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, bound) for bound > 0 (the modulo bias is below 2^-40 for bounds we use).
  uint64_t below(uint64_t bound) { return next() % bound; }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  const State& state() const { return state_; }
  void set_state(const State& state) { state_ = state; }

  // Mixes two numbers into one seed (used to derive per-epoch streams from the run's seed).
  static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t s = a ^ (b * 0x9E3779B97F4A7C15ull);
    return splitmix64(s);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  State state_{};
};

}  // namespace kolo::train

// Training checkpoints: everything a resumed run needs to continue exactly where the saved one
// stopped (bitwise the same losses): the parameters, AdamW's moments and step count, the sampler
// position, the random generator, and the loss history (for the final plot). Written by rank 0
// as DIR/step-<n>.ckpt through a temporary file and a rename, so a crash never leaves a torn
// checkpoint under the final name; only the newest kKeptCheckpoints files are kept.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed_sampler.hpp"
#include "rng.hpp"

namespace kolo::train {

inline constexpr int kKeptCheckpoints = 2;

// What must match between the saving and the resuming run (checked on load).
struct CheckpointShape {
  int vocab = 0, seq = 0, layers = 0, heads = 0, dim = 0;
  uint64_t num_params = 0;
  uint64_t corpus_fingerprint = 0;
  bool operator==(const CheckpointShape&) const = default;
};

struct LossPoint {
  uint64_t step = 0;  // 1-based optimizer step
  double loss = 0;
};

struct TrainState {
  CheckpointShape shape;
  uint64_t step = 0;          // optimizer steps completed
  uint64_t global_batch = 0;  // samples per step over all ranks, for the "same run" check
  uint64_t seed = 0;
  SamplerPosition sampler;
  Rng::State rng{};
  uint64_t adam_steps = 0;
  std::vector<float> params, adam_m, adam_v;
  std::vector<LossPoint> train_losses, validation_losses;
};

// Writes DIR/step-<state.step>.ckpt (creating DIR) and deletes older checkpoints beyond
// kKeptCheckpoints. Returns the path written. Throws kolo::Error on I/O failure.
std::string save_checkpoint(const std::string& dir, const TrainState& state);

// Where save_checkpoint writes step `step` in dir.
std::string checkpoint_path(const std::string& dir, uint64_t step);

// The newest checkpoint in dir (highest step), or nullopt when there is none.
std::optional<std::string> latest_checkpoint(const std::string& dir);

// Reads a checkpoint; throws kolo::Error when the file is unreadable, truncated or not a
// checkpoint, and kolo::InvalidArgument when its shape differs from `expected` (naming the field).
TrainState load_checkpoint(const std::string& path, const CheckpointShape& expected);

// A checkpoint's content in memory (the same bytes save_checkpoint writes): what kolo-train
// --elastic sends a rank that joins. decode_train_state checks as load_checkpoint does, naming
// `from` (where the bytes came from) in its errors.
std::string encode_train_state(const TrainState& state);
TrainState decode_train_state(const std::string& bytes, const std::string& from, const CheckpointShape& expected);

}  // namespace kolo::train

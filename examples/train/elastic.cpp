#include "elastic.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <utility>

#include "kolo/error.hpp"

namespace kolo::train {

void StepMemory::keep(TrainState state) {
  if (states_.size() == 2) states_.pop_front();
  states_.push_back(std::move(state));
}

TrainState StepMemory::take(uint64_t step) const {
  for (const TrainState& s : states_)
    if (s.step == step) return s;
  std::string kept;
  for (const TrainState& s : states_) {
    if (!kept.empty()) kept += ", ";
    kept += std::to_string(s.step);
  }
  throw Error("kolo-train --elastic: no state in memory for step " + std::to_string(step) + " (kept: " +
              (kept.empty() ? std::string("none") : kept) + ")");
}

void StepMemory::keep_line(uint64_t step, std::string line) {
  if (lines_.size() == 2) lines_.pop_front();
  lines_.emplace_back(step, std::move(line));
}

std::string StepMemory::line(uint64_t step) const {
  for (const auto& [s, l] : lines_)
    if (s == step) return l;
  return "";
}

uint64_t newest_checkpoint_written(const std::string& dir, uint64_t first_step, uint64_t current_step, int ckpt_every) {
  uint64_t newest = 0;
  for (uint64_t step = first_step; step <= current_step; ++step) {
    const bool written = step == first_step ? first_step > 0 : ckpt_every > 0 && step % uint64_t(ckpt_every) == 0;
    if (written && std::filesystem::exists(checkpoint_path(dir, step))) newest = step;
  }
  return newest;
}

bool is_rank_loss(const std::exception& e) {
  if (dynamic_cast<const ExcludedError*>(&e) != nullptr) return false;
  if (dynamic_cast<const MismatchError*>(&e) != nullptr) return false;
  if (dynamic_cast<const InvalidArgument*>(&e) != nullptr) return false;
  return dynamic_cast<const Error*>(&e) != nullptr;
}

std::string blamed_rank(const std::exception& e) {
  int rank = -1;
  if (auto* peer = dynamic_cast<const PeerError*>(&e)) rank = peer->peer_rank();
  if (auto* timeout = dynamic_cast<const TimeoutError*>(&e)) rank = timeout->peer_rank();
  return rank >= 0 ? "rank " + std::to_string(rank) : std::string("a rank");
}

std::string shares_text(size_t global_batch, int ranks) {
  const size_t k = size_t(ranks);
  std::string out;
  for (size_t r = 0; r < k; ++r) {
    if (r > 0) out += '+';
    out += std::to_string(global_batch / k + (r < global_batch % k ? 1 : 0));
  }
  return out;
}

std::string local_batch_text(size_t global_batch, int ranks, int accum) {
  const size_t k = size_t(ranks), parts = size_t(accum);
  size_t low = SIZE_MAX, high = 0;
  for (size_t r = 0; r < k; ++r) {
    const size_t share = global_batch / k + (r < global_batch % k ? 1 : 0);
    for (size_t m = 0; m < parts; ++m) {  // train_step.hpp's cut
      const size_t n = (m + 1) * share / parts - m * share / parts;
      low = std::min(low, n);
      high = std::max(high, n);
    }
  }
  return low == high ? std::to_string(low) : std::to_string(low) + "-" + std::to_string(high);
}

}  // namespace kolo::train

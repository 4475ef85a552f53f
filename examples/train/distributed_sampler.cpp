#include "distributed_sampler.hpp"

#include <numeric>
#include <string>
#include <utility>

#include "kolo/error.hpp"
#include "rng.hpp"

namespace kolo::train {

DistributedSampler::DistributedSampler(size_t num_samples, uint64_t seed, int rank, int world_size,
                                       size_t global_batch, bool uneven_shares)
    : num_samples_(num_samples), seed_(seed), rank_(rank), world_size_(world_size), global_batch_(global_batch) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw InvalidArgument("sampler: rank " + std::to_string(rank) + " outside a world of " + std::to_string(world_size));
  if (uneven_shares && global_batch < static_cast<size_t>(world_size))
    throw InvalidArgument("sampler: the global batch (" + std::to_string(global_batch) +
                          ") must hold at least one sample per rank (" + std::to_string(world_size) + " ranks)");
  if (!uneven_shares && (global_batch == 0 || global_batch % static_cast<size_t>(world_size) != 0))
    throw InvalidArgument("sampler: the global batch (" + std::to_string(global_batch) +
                          ") must be a positive multiple of the number of ranks (" + std::to_string(world_size) + ")");
  if (global_batch > num_samples)
    throw InvalidArgument("sampler: the global batch of " + std::to_string(global_batch) + " samples exceeds the " +
                          std::to_string(num_samples) + " sample windows of the training data");
}

std::vector<size_t> DistributedSampler::epoch_order(uint64_t epoch) const {
  std::vector<size_t> order(num_samples_);
  std::iota(order.begin(), order.end(), size_t{0});
  Rng rng(Rng::mix(seed_, epoch));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);  // Fisher-Yates
  return order;
}

const std::vector<size_t>& DistributedSampler::order_for(uint64_t epoch) {
  if (cached_epoch_ != epoch) {
    cached_order_ = epoch_order(epoch);
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

std::vector<size_t> DistributedSampler::next_step() {
  if (position_.next + global_batch_ > num_samples_) {
    ++position_.epoch;
    position_.next = 0;
  }
  const std::vector<size_t>& order = order_for(position_.epoch);
  const size_t count = share();
  std::vector<size_t> mine;
  mine.reserve(count);
  for (size_t j = 0; j < count; ++j)
    mine.push_back(order[position_.next + static_cast<size_t>(rank_) + j * static_cast<size_t>(world_size_)]);
  position_.next += global_batch_;
  return mine;
}

size_t DistributedSampler::share() const {
  const size_t k = static_cast<size_t>(world_size_);
  return global_batch_ / k + (static_cast<size_t>(rank_) < global_batch_ % k ? 1 : 0);
}

void DistributedSampler::set_position(const SamplerPosition& position) {
  if (position.next > num_samples_)
    throw InvalidArgument("sampler: position " + std::to_string(position.next) + " is past the " +
                          std::to_string(num_samples_) + " samples of an epoch (another corpus or --seq?)");
  position_ = position;
}

}  // namespace kolo::train

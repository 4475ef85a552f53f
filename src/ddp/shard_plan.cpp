// The shard plan: which elements of each bucket a rank owns. Pure functions of the bucket plan
// and the rank count, so every rank computes every other rank's shard without communicating
// (gather_state relies on it).
#include "kolo/error.hpp"
#include "kolo/sharded_ddp.hpp"

namespace kolo {

BucketSplit split_bucket(size_t count, int ranks) {
  if (ranks < 1) throw InvalidArgument("kolo: ShardedDataParallel: rank count " + std::to_string(ranks));
  const size_t p = static_cast<size_t>(ranks);
  return {count / p, count % p};
}

std::vector<ShardRange> plan_shard(const std::vector<DdpBucket>& buckets, int rank, int ranks) {
  if (rank < 0 || rank >= ranks)
    throw InvalidArgument("kolo: ShardedDataParallel: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  std::vector<ShardRange> shard;
  for (const DdpBucket& b : buckets) {
    const BucketSplit s = split_bucket(b.count, ranks);
    if (s.chunk > 0) shard.push_back({b.offset + static_cast<size_t>(rank) * s.chunk, s.chunk, false});
    if (s.tail > 0) shard.push_back({b.offset + s.chunk * static_cast<size_t>(ranks), s.tail, true});
  }
  return shard;
}

}  // namespace kolo

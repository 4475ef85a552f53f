#include "engine/shared_group.hpp"

#include "common/hash.hpp"

namespace kolo::engine {

uint16_t shared_group_id(const std::string& prefix) {
  const uint64_t h = common::fnv1a(prefix);
  const auto id = static_cast<uint16_t>(h ^ h >> 16 ^ h >> 32 ^ h >> 48);
  return id == 0 ? 1 : id;
}

std::shared_ptr<const GroupInfo> make_shared_group(const GroupInfo& parent, int ctx_size, const std::string& name,
                                                   const std::string& prefix, int rank,
                                                   const std::vector<int>& parent_ranks, algo::HostLayout hosts,
                                                   std::shared_ptr<const BlameBoard> blame) {
  auto g = std::make_shared<GroupInfo>();
  g->name = name;
  g->rank = rank;
  g->size = static_cast<int>(parent_ranks.size());
  g->hosts = std::move(hosts);
  g->blame = std::move(blame);
  g->owner = parent.shares() ? parent.owner : parent.name;
  g->id = shared_group_id(prefix);
  g->from_ctx.assign(static_cast<size_t>(ctx_size), -1);
  for (size_t i = 0; i < parent_ranks.size(); ++i) {
    const int peer = parent.to_ctx(parent_ranks[i]);
    g->ctx_rank.push_back(peer);
    g->from_ctx[static_cast<size_t>(peer)] = static_cast<int>(i);
  }
  return g;
}

}  // namespace kolo::engine

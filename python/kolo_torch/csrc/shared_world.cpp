#include "shared_world.hpp"

#include <mutex>
#include <string>
#include <vector>

namespace kolo_torch {
namespace {

std::mutex world_mu;
std::weak_ptr<kolo::ProcessGroup> world_pg, world_p2p;

}  // namespace

void remember_world(const KoloGroups& world) {
  std::lock_guard<std::mutex> lk(world_mu);
  world_pg = world.pg;
  world_p2p = world.p2p;
}

void replace_world(const KoloGroups& old, const KoloGroups& now) {
  std::lock_guard<std::mutex> lk(world_mu);
  if (world_pg.lock() != old.pg) return;
  world_pg = now.pg;
  world_p2p = now.p2p;
}

int world_generation() {
  std::lock_guard<std::mutex> lk(world_mu);
  auto pg = world_pg.lock();
  return pg ? pg->generation() : 0;
}

std::optional<KoloGroups> share_world(kolo::Store& store, int rank, int size, int world_rank,
                                      std::chrono::milliseconds timeout) {
  KoloGroups world;
  {
    std::lock_guard<std::mutex> lk(world_mu);
    world = KoloGroups{world_pg.lock(), world_p2p.lock()};
  }
  if (world_rank < 0 || !world.pg || !world.p2p) return std::nullopt;
  // Every member publishes its world rank under the subgroup's own store prefix (torch gives
  // each new group a fresh one), then reads the others': the member list in subgroup order.
  const std::string me = std::to_string(world_rank);
  store.set("kolo_share/world_rank/" + std::to_string(rank), kolo::Bytes(me.begin(), me.end()));
  std::vector<int> members;
  for (int r = 0; r < size; ++r) {
    const kolo::Bytes v = store.get("kolo_share/world_rank/" + std::to_string(r));
    members.push_back(std::stoi(std::string(v.begin(), v.end())));
  }
  kolo::SplitOptions o;  // share_connections unset: KOLO_SPLIT_SHARE decides
  o.timeout = timeout;
  KoloGroups sub{world.pg->subgroup_of_members(members, o), nullptr};
  if (!sub.pg) return std::nullopt;
  sub.p2p = world.p2p->subgroup_of_members(members, o);
  return sub;
}

}  // namespace kolo_torch

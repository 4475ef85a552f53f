// Growing a torch backend (kolo_torch.grow, kolo_torch.join): the collectives' kolo group grows
// (ProcessGroup::grow on the members, ProcessGroup::join on a replacement), and the
// point-to-point group is split off the grown group rather than grown too: each of kolo's lines
// has its own queue, and two joiners could take their places in the two queues in different
// orders (ranks that disagree between the groups); a split of the grown group is collective over
// members and joiners alike and numbers them as the grown group does.
#include <c10/util/Exception.h>

#include "backend.hpp"
#include "errors.hpp"
#include "store_adapter.hpp"

namespace kolo_torch {
namespace {

// The point-to-point group beside `pg`, on connections of its own (never shared: point-to-point
// traffic must not wait behind a collective, whatever KOLO_SPLIT_SHARE says).
std::shared_ptr<kolo::ProcessGroup> p2p_beside(kolo::ProcessGroup& pg) {
  kolo::SplitOptions so;
  so.share_connections = false;
  return pg.split(0, pg.rank(), so);
}

}  // namespace

c10::intrusive_ptr<ProcessGroupKolo> ProcessGroupKolo::grow_members(const kolo::GrowOptions& opts) {
  return with_torch_errors([&]() -> c10::intrusive_ptr<ProcessGroupKolo> {
    auto pg = pg_->grow(opts);
    if (!pg) return {};
    auto p2p = p2p_beside(*pg);
    TORCH_CHECK(p2p, "kolo: grow: rank ", rank_, " got no point-to-point group in the grown group of ", pg->size());
    // The old groups are retired here, where every old member is (grow is collective over them):
    // their shutdown is collective over the old members, and torch would drop them at some later,
    // different point on each rank. Their operations fail from now on, as after a shrink.
    pg_->shutdown();
    p2p_->shutdown();
    replace_world(KoloGroups{pg_, p2p_}, KoloGroups{pg, p2p});
    return c10::make_intrusive<ProcessGroupKolo>(KoloGroups{pg, p2p}, timeout_);
  });
}

c10::intrusive_ptr<ProcessGroupKolo> ProcessGroupKolo::join_world(const c10::intrusive_ptr<c10d::Store>& store,
                                                                  std::chrono::milliseconds timeout,
                                                                  std::chrono::milliseconds wait) {
  return with_torch_errors([&] {
    auto base = adapt_store(store);
    base->set_timeout(timeout);
    // Named and prefixed as the members' world backend made its collectives' group (backend.cpp):
    // the first group named "torch" in a process is the line whose queue the joiner enters.
    kolo::GroupOptions o;
    o.timeout = timeout;
    o.name = "torch";
    kolo::JoinOptions jo;
    jo.timeout = wait;
    auto pg = kolo::ProcessGroup::join(kolo::make_prefix_store("coll", base), o, jo);
    auto p2p = p2p_beside(*pg);
    TORCH_CHECK(p2p, "kolo: join: rank ", pg->rank(), " got no point-to-point group in the group of ", pg->size());
    remember_world(KoloGroups{pg, p2p});  // later subgroups may share its connections (KOLO_SPLIT_SHARE)
    return c10::make_intrusive<ProcessGroupKolo>(KoloGroups{pg, p2p}, timeout);
  });
}

int ProcessGroupKolo::generation() const { return pg_->generation(); }

}  // namespace kolo_torch

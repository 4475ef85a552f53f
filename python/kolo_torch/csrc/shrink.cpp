// Shrinking a torch backend: its two kolo groups (collectives, point-to-point) shrink one after
// the other, the second to the members the first settled, so both hold the same survivors.
#include <algorithm>
#include <string>

#include <c10/util/Exception.h>

#include "backend.hpp"
#include "errors.hpp"
#include "kolo/error.hpp"

namespace kolo_torch {
namespace {

std::string list_text(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) {
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out;
}

}  // namespace

ProcessGroupKolo::ProcessGroupKolo(const KoloGroups& groups, std::chrono::milliseconds timeout)
    : BackendBase(groups.pg->rank(), groups.pg->size()), timeout_(timeout), pg_(groups.pg), p2p_(groups.p2p) {}

ProcessGroupKolo::Shrunk ProcessGroupKolo::shrink_survivors(const std::optional<std::vector<int>>& exclude,
                                                           std::chrono::milliseconds timeout) {
  return with_torch_errors([&] {
    kolo::ShrinkOptions o;
    o.timeout = timeout;
    if (exclude) {
      for (int r : *exclude)
        TORCH_CHECK(r >= 0 && r < size_, "kolo: shrink: rank ", r, " to exclude is outside the group of ", size_);
      // Refused before anything is aborted, as torch's shrink_group refuses it: an excluded rank
      // keeps its group (torch's rule: it does not take part, it ends).
      if (std::find(exclude->begin(), exclude->end(), rank_) != exclude->end())
        throw kolo::ExcludedError("kolo: rank " + std::to_string(rank_) + " called shrink but is among the ranks to "
                                  "exclude (" + list_text(*exclude) + "); only the survivors call it",
                                  pg_->generation() + 1);
      auto pg = pg_->shrink(*exclude, o);
      auto p2p = p2p_->shrink(*exclude, o);
      TORCH_CHECK(pg && p2p, "kolo: shrink: rank ", rank_, " was excluded from generation ", pg_->generation() + 1,
                  " although not among the ranks to exclude (", list_text(*exclude), ")");
      std::vector<int> members;
      for (int r = 0; r < size_; ++r)
        if (std::find(exclude->begin(), exclude->end(), r) == exclude->end()) members.push_back(r);
      replace_world(KoloGroups{pg_, p2p_}, KoloGroups{pg, p2p});
      return Shrunk{c10::make_intrusive<ProcessGroupKolo>(KoloGroups{pg, p2p}, timeout_), members};
    }
    // Whoever answers: kolo's agreement settles the members; the new group tells each survivor
    // who the others were (its rank i is the i-th member, in this group's rank order).
    auto pg = pg_->shrink(o);
    std::vector<int32_t> mine{rank_}, all(static_cast<size_t>(pg->size()));
    kolo::AllgatherOptions ao;
    ao.timeout = timeout;
    pg->allgather(kolo::Buffer(mine.data(), 1), kolo::Buffer(all.data(), all.size()), ao)->wait();
    std::vector<int> members(all.begin(), all.end()), excluded;
    for (int r = 0; r < size_; ++r)
      if (std::find(members.begin(), members.end(), r) == members.end()) excluded.push_back(r);
    auto p2p = p2p_->shrink(excluded, o);
    TORCH_CHECK(p2p, "kolo: shrink: the point-to-point group excluded rank ", rank_,
                " although the collectives' group kept it (members ", list_text(members), ")");
    replace_world(KoloGroups{pg_, p2p_}, KoloGroups{pg, p2p});
    return Shrunk{c10::make_intrusive<ProcessGroupKolo>(KoloGroups{pg, p2p}, timeout_), members};
  });
}

#ifdef KOLO_TORCH_BACKEND_SHRINK
c10::intrusive_ptr<c10d::Backend> ProcessGroupKolo::shrink(const std::vector<int64_t>& ranks_to_exclude,
                                                           int /*shrink_flags*/,
                                                           const c10::intrusive_ptr<Options>& opts_override) {
  const std::vector<int> exclude(ranks_to_exclude.begin(), ranks_to_exclude.end());
  const auto timeout = opts_override ? opts_override->timeout : timeout_;
  return shrink_survivors(exclude, timeout).backend;
}
#endif

}  // namespace kolo_torch

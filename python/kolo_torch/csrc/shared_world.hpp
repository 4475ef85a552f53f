// KOLO_SPLIT_SHARE for torch. torch's new_group hands a backend's creator a fresh store, the
// subgroup rank and its size, never the parent or the member list, so kolo's split() cannot be
// used. Instead the backend made while no default group exists (init_process_group's: the
// world) is remembered here, and a later subgroup learns its members' world ranks through its
// store and asks the world's kolo groups for subgroups made by their members alone
// (ProcessGroup::subgroup_of_members), which share the world's connections when sharing is on.
#pragma once
#include <memory>
#include <optional>

#include "kolo/kolo.hpp"

namespace kolo_torch {

// The two kolo groups of one torch backend (collectives, and point-to-point).
struct KoloGroups {
  std::shared_ptr<kolo::ProcessGroup> pg, p2p;
};

// The world's groups, held weakly: a destroyed world backend is not shared.
void remember_world(const KoloGroups& world);

// After a shrink: when `old` is the remembered world, the survivors' groups `now` are (later
// subgroups then share the live world's connections, not the aborted one's).
void replace_world(const KoloGroups& old, const KoloGroups& now);

// The remembered world's generation (0 at launch, +1 per shrink or grow), 0 when none is alive.
int world_generation();

// A subgroup's groups on the world's connections, or nullopt when sharing is off
// (KOLO_SPLIT_SHARE) or no world is alive: the caller then connects anew. Every member calls it
// (torch calls the creator on members only); `world_rank` is this rank's in the world.
std::optional<KoloGroups> share_world(kolo::Store& store, int rank, int size, int world_rank,
                                      std::chrono::milliseconds timeout);

}  // namespace kolo_torch

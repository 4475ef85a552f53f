// What a subgroup that shares its parent's connections (ProcessGroup::split with
// share_connections) is to the engine: a GroupInfo whose ranks map onto the peers of the
// Context it runs on. Nothing else is its own; its operations go to the parent's executor.
//
// The map composes: a sharing subgroup of a sharing subgroup maps straight onto the Context's
// peers, so every group on one set of connections is one hop from it, however deep the nesting.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_comm.hpp"

namespace kolo::engine {

// The id that tags of the group with store prefix `prefix` carry (tags.hpp): 16 bits of its
// hash, never 0 (the owner's). Two groups on the same connections with equal ids (chance
// 1 in 65,535 per pair of groups) lose only the group check: their messages still carry
// sequence numbers and fingerprints.
uint16_t shared_group_id(const std::string& prefix);

// The subgroup of `parent` (itself sharing or not) whose rank i is parent rank parent_ranks[i].
// `ctx_size` is the number of peers of the Context `parent` runs on.
std::shared_ptr<const GroupInfo> make_shared_group(const GroupInfo& parent, int ctx_size, const std::string& name,
                                                   const std::string& prefix, int rank,
                                                   const std::vector<int>& parent_ranks, algo::HostLayout hosts,
                                                   std::shared_ptr<const BlameBoard> blame);

}  // namespace kolo::engine

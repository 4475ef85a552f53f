// ProcessGroup::shrink's agreement: which ranks of a failed group form the next generation.
// Through the store only (the group's connections are aborted by then), under one key
// namespace per generation, "<root>/gen<G>/shrink":
//   present/<rank>  written by every caller first; its value lists the ranks its group's
//                   failure blamed ("lost 3,5"), so that nobody waits for a rank known gone
//   members         the decision: the old ranks of generation G, ascending ("0,1,3"); written
//                   once (compare_set: the first proposal wins, every rank adopts it)
// Who proposes: in the named form, any rank that has seen every named survivor present (they
// all propose the same list). Otherwise the lowest present rank, once every rank nobody reported
// lost is present, or at its deadline; should it die before publishing, the next present rank
// proposes one takeover step after the deadline, without the ranks below it, and so on: every
// wait is bounded, and the store's compare_set keeps the decision single.
#pragma once
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kolo/store.hpp"

namespace kolo::engine {

struct ShrinkRequest {
  std::string ns;        // "<root>/gen<G>/shrink"
  int generation = 1;    // G, for messages
  std::string group;     // the old group's name, for messages
  int rank = 0, size = 1;  // in the old group
  std::optional<std::vector<int>> exclude;  // the named form's excluded ranks, else whoever answers
  std::vector<int> lost;  // ranks this rank's group failure blamed
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds takeover{500};  // how long each next rank leaves the one below to publish
};

// The members (old ranks, ascending). Throws ExcludedError when this rank is not among them,
// TimeoutError when the named survivors did not all answer in time, InvalidArgument when ranks
// named different survivors, and whatever the store throws.
// `present` runs once this rank's presence is in the store (the caller aborts its old group then).
std::vector<int> agree_survivors(Store& store, const ShrinkRequest& req, const std::function<void()>& present);

// "0,1,3" and back (empty on malformed text).
std::string encode_ranks(const std::vector<int>& ranks);
std::optional<std::vector<int>> decode_ranks(const std::string& text);

}  // namespace kolo::engine

#include "algorithms/sub_comm.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace kolo::algo {

SubComm::SubComm(Comm& parent, std::vector<int> ranks, int my_index, const CollArgs& args, int slot_base, bool finalizes)
    : parent_(parent),
      ranks_(std::move(ranks)),
      me_(my_index),
      args_(args),
      hosts_(parent.hosts().restricted_to(ranks_)),
      slot_base_(slot_base),
      finalizes_(finalizes) {}

int SubComm::to_parent(int peer) const {
  if (peer < 0 || peer >= size())
    throw std::logic_error("kolo: sub-group peer " + std::to_string(peer) + " outside a sub-group of " + std::to_string(size()));
  return ranks_[static_cast<size_t>(peer)];
}

}  // namespace kolo::algo

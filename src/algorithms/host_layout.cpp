#include "algorithms/host_layout.hpp"

#include <algorithm>
#include <map>

namespace kolo::algo {

HostLayout HostLayout::from_indices(const std::vector<int>& index) {
  HostLayout h;
  std::map<int, int> dense;  // given index -> host number in order of first rank
  for (int key : index) {
    auto [it, fresh] = dense.emplace(key, static_cast<int>(h.members.size()));
    if (fresh) h.members.emplace_back();
    h.members[static_cast<size_t>(it->second)].push_back(static_cast<int>(h.host_of.size()));
    h.host_of.push_back(it->second);
  }
  for (const auto& m : h.members) h.max_per_host = std::max(h.max_per_host, static_cast<int>(m.size()));
  return h;
}

HostLayout HostLayout::from_ids(const std::vector<std::string>& ids) {
  std::map<std::string, int> number;
  std::vector<int> index;
  index.reserve(ids.size());
  for (const std::string& id : ids) index.push_back(number.emplace(id, static_cast<int>(number.size())).first->second);
  return from_indices(index);
}

HostLayout HostLayout::single_host(int nranks) { return from_indices(std::vector<int>(static_cast<size_t>(nranks), 0)); }

bool HostLayout::hierarchical() const {
  if (members.size() < 2) return false;
  for (const auto& m : members)
    if (m.size() > 1) return true;
  return false;
}

bool HostLayout::uniform_blocks() const {
  if (members.empty()) return false;
  const size_t per_host = members[0].size();
  for (size_t k = 0; k < members.size(); ++k) {
    if (members[k].size() != per_host) return false;
    for (size_t i = 0; i < per_host; ++i)
      if (members[k][i] != static_cast<int>(k * per_host + i)) return false;
  }
  return true;
}

HostLayout HostLayout::restricted_to(const std::vector<int>& ranks) const {
  std::vector<int> index;
  index.reserve(ranks.size());
  for (int r : ranks) index.push_back(host_of[static_cast<size_t>(r)]);
  return from_indices(index);
}

}  // namespace kolo::algo

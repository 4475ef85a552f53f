#include "weight_decay_policy.hpp"

#include <algorithm>

namespace kolo::train {

bool is_decayed(const std::string& name) {
  if (name == "wte" || name == "wpe") return true;
  const bool layer_norm = name.rfind("lnf.", 0) == 0 || name.find(".ln") != std::string::npos;
  return name.ends_with(".weight") && !layer_norm;
}

std::vector<DecayRange> decay_ranges(const std::vector<gpt::ParamInfo>& layout) {
  std::vector<DecayRange> ranges;
  ranges.reserve(layout.size());
  for (const gpt::ParamInfo& p : layout) ranges.push_back({p.offset, p.count, is_decayed(p.name)});
  return ranges;
}

std::vector<DecayRange> shard_decay_ranges(const std::vector<DecayRange>& ranges, const std::vector<ShardRange>& shard) {
  std::vector<DecayRange> pieces;
  size_t state = 0;  // where the current shard range's moments start
  for (const ShardRange& s : shard) {
    for (const DecayRange& r : ranges) {
      const size_t begin = std::max(r.offset, s.offset), end = std::min(r.offset + r.count, s.offset + s.count);
      if (begin < end) pieces.push_back({begin, end - begin, r.decay, state + (begin - s.offset)});
    }
    state += s.count;
  }
  return pieces;
}

}  // namespace kolo::train

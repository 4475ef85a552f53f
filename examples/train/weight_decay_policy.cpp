#include "weight_decay_policy.hpp"

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

}  // namespace kolo::train

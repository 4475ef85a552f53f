// Which parameters AdamW decays, by the GPT-2/nanoGPT rule "decay every 2-D tensor": the weight
// matrices and the two embedding tables, but not biases or LayerNorm gains. The model's layout
// carries names, not shapes, so the rule is read from the names (model/model.hpp lists them).
#pragma once
#include <string>
#include <vector>

#include "adamw.hpp"
#include "kolo/sharded_ddp.hpp"
#include "model/config.hpp"

namespace kolo::train {

// True for "wte", "wpe" and "*.weight" outside LayerNorms ("h.0.ln1.weight", "lnf.weight").
bool is_decayed(const std::string& param_name);

// One AdamW range per parameter of the layout.
std::vector<DecayRange> decay_ranges(const std::vector<gpt::ParamInfo>& layout);

// The pieces of `ranges` inside a ZeRO-1 shard (kolo::ShardedDataParallel::shard()), with their
// moments packed in the shard's order: the state of a sharded AdamW of shard-size elements.
std::vector<DecayRange> shard_decay_ranges(const std::vector<DecayRange>& ranges, const std::vector<ShardRange>& shard);

}  // namespace kolo::train

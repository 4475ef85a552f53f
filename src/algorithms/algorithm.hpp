// An algorithm is one file defining one `const Algorithm kXxx` and one line in registry.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include "algorithms/comm.hpp"
#include "algorithms/cost_model.hpp"

namespace kolo::algo {

struct Algorithm {
  const char* name;   // what KOLO_ALGO / Options.algorithm say: "ring", "tree", "direct", ...
  CollKind kind;
  // Whether it can run these arguments on a group placed on hosts like this (null: always).
  bool (*supports)(const CollArgs& args, const HostLayout& hosts);
  void (*run)(Comm& comm);
  // The engine's direct path (a small collective run at once by its issuing thread) may run
  // this algorithm in groups of up to this many ranks: there every rank posts all the receives
  // of one collective before it first waits for one, so "has everything arrived?" can be
  // answered before anything is consumed. 0: never.
  int direct_max_ranks = 0;
  // At two ranks it moves at most one whole message each way (the block the peer needs, as
  // one message below KOLO_CHUNK_BYTES) and combines what arrived in rank order, so the direct
  // path may run it as that exchange (src/engine/two_rank_direct.hpp).
  bool two_rank_exchange = false;
};
constexpr int kAnyRanks = 1 << 30;  // direct_max_ranks: whatever the group's size

// Every registered algorithm (registry.cpp).
const std::vector<const Algorithm*>& all_algorithms();
// Null if none. A string_view: selection looks names up on every call, and a literal must not
// become a std::string first.
const Algorithm* find_algorithm(CollKind kind, std::string_view name);
// Picks the algorithm for these arguments: `requested` (Options.algorithm, else KOLO_ALGO) when
// it names one that supports them, else the automatic choice by size and rank count (select.cpp).
// The tunables the automatic choice reads. A group reads them once, when it is created, so
// that choosing costs no environment lookups per call.
struct SelectionTunables {
  int64_t small_bytes = 0;     // KOLO_SMALL_BYTES
  int64_t tree_max_bytes = 0;  // KOLO_TREE_MAX_BYTES
  int64_t chunk_bytes = 0;     // KOLO_CHUNK_BYTES
  std::string algo;            // KOLO_ALGO
  // KOLO_SELECT: true picks the least predicted time of `model` among the algorithms that
  // support the call; false (the default of a hand-built SelectionTunables) the threshold rule.
  bool use_model = false;
  CostModel model;             // KOLO_MODEL_SHM, KOLO_MODEL_NET, KOLO_MODEL_REDUCE_GBPS
  static SelectionTunables from_config();
};
// `hosts` says which ranks share a host: groups that span hosts with several ranks on a host
// take the hierarchical algorithms ("hier") above the small-message threshold.
const Algorithm& select_algorithm(const CollArgs& args, const HostLayout& hosts, const std::string& requested,
                                  const SelectionTunables& tunables);
// The same for `nranks` ranks on one host, reading the tunables now.
const Algorithm& select_algorithm(const CollArgs& args, int nranks, const std::string& requested);

// A group's last choice per collective. Without a per-call request the choice depends only on
// the collective and its per-rank bytes (the layout and tunables are the group's, fixed at
// creation; supports() reads only the layout), and training loops repeat the same few sizes:
// a hit costs a compare instead of the rule, a registry walk by name and the model's
// predictions (about 400 instructions). Not thread-safe: the group calls it under its issue lock.
class SelectionMemo {
 public:
  // The algorithm for `args` and its index in all_algorithms() (what the stamp carries).
  struct Choice {
    const Algorithm* algorithm;
    uint8_t index;
  };
  // The hit is inline: every collective issued passes here, and a call with four arguments to
  // pass cost as much as the compare.
  Choice choose(const CollArgs& args, const HostLayout& hosts, const std::string& requested,
                const SelectionTunables& tunables) {
    if (requested.empty()) {
      const Entry& e = last_[static_cast<int>(args.kind)];
      if (e.valid && e.bytes == args.bytes()) return e.choice;
    }
    return choose_slow(args, hosts, requested, tunables);
  }

 private:
  struct Entry {
    bool valid = false;
    size_t bytes = 0;
    Choice choice{nullptr, 0};
  };
  Choice choose_slow(const CollArgs& args, const HostLayout& hosts, const std::string& requested,
                     const SelectionTunables& tunables);
  Entry last_[kNumCollKinds];
};

}  // namespace kolo::algo

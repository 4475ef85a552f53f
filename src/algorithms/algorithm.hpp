// An algorithm is one file: its run function on algo::Comm and one descriptor, registered from
// that file with KOLO_REGISTER_ALGORITHM. The descriptor says everything the rest of kolo needs
// to know about it (name, stable wire id, the collectives it serves, its limits, its cost), so
// that selection, the cost model, the engine's direct path and the tests iterate descriptors and
// never name an algorithm's symbol. Adding an algorithm: the file, and its line in
// src/algorithms/meson.build (tests/algorithms/extra_algorithm_test.cpp proves it).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>
#include "algorithms/comm.hpp"
#include "algorithms/cost_model.hpp"

namespace kolo::algo {

// A set of collectives (one bit per CollKind).
class CollSet {
 public:
  constexpr CollSet() = default;
  constexpr CollSet(std::initializer_list<CollKind> kinds) {
    for (CollKind k : kinds) bits_ |= bit(k);
  }
  constexpr bool has(CollKind k) const { return (bits_ & bit(k)) != 0; }

 private:
  static constexpr uint32_t bit(CollKind k) { return uint32_t{1} << static_cast<unsigned>(k); }
  uint32_t bits_ = 0;
};

constexpr int kAnyRanks = 1 << 30;  // a rank limit that every group meets

struct Algorithm {
  // What KOLO_ALGO / Options.algorithm say: "ring", "tree", "direct", ... Unique per collective.
  const char* name;
  // Carried in every message's stamp (engine/tags.hpp), so that ranks that chose differently see
  // a mismatch naming both. Stable across versions: never reuse or renumber one.
  uint8_t wire_id;
  CollSet serves;  // the collectives it runs (run() switches on args().kind when several)
  void (*run)(Comm& comm);
  // Whether it can run these arguments on a group placed on hosts like this (null: always),
  // beyond the rank limits below.
  bool (*supports)(const CollArgs& args, const HostLayout& hosts) = nullptr;
  // Predicted seconds for `q` (cost_model.hpp); null: the model never proposes it (it runs when
  // the threshold rule or a request names it).
  double (*cost)(const CostQuery& q) = nullptr;
  // The group sizes it runs on.
  int min_ranks = 1;
  int max_ranks = kAnyRanks;
  // The engine's direct path (a small collective run at once by its issuing thread) may run
  // this algorithm in groups of up to this many ranks: there every rank posts all the receives
  // of one collective before it first waits for one, so "has everything arrived?" can be
  // answered before anything is consumed. 0: never.
  int direct_max_ranks = 0;

  bool fits(int nranks) const { return nranks >= min_ranks && nranks <= max_ranks; }
  // Its rank limits and supports(): whether it can run `args` on `hosts`.
  bool usable(const CollArgs& args, const HostLayout& hosts) const {
    return serves.has(args.kind) && fits(hosts.size()) && (supports == nullptr || supports(args, hosts));
  }
};

// Adds an algorithm to the registry while the library (or the program defining it) loads.
// Exits the process with a message when its wire id or its (collective, name) is taken: two
// algorithms on one id would make every message of one look like the other's.
struct AlgorithmRegistration {
  explicit AlgorithmRegistration(const Algorithm& a);
};
// In an algorithm's file, at namespace scope: KOLO_REGISTER_ALGORITHM(kMyAlgorithm);
#define KOLO_REGISTER_ALGORITHM(descriptor) \
  static const ::kolo::algo::AlgorithmRegistration descriptor##_registration { descriptor }

// Every registered algorithm, in wire-id order (registry.cpp).
const std::vector<const Algorithm*>& all_algorithms();
// Null if none. A string_view: selection looks names up on every call, and a literal must not
// become a std::string first.
const Algorithm* find_algorithm(CollKind kind, std::string_view name);
// The algorithm a stamp's wire id names, or null.
const Algorithm* algorithm_by_wire_id(uint8_t id);
// Picks the algorithm for these arguments: `requested` (Options.algorithm, else KOLO_ALGO) when
// it names one that supports them, else the automatic choice by size and rank count (select.cpp).
// The tunables the automatic choice reads. A group reads them once, when it is created, so
// that choosing costs no environment lookups per call.
struct SelectionTunables {
  int64_t small_bytes = 0;     // KOLO_SMALL_BYTES
  int64_t tree_max_bytes = 0;  // KOLO_TREE_MAX_BYTES
  int64_t chunk_bytes = 0;     // KOLO_CHUNK_BYTES
  int64_t twoshot_min_bytes = 0;  // KOLO_TWOSHOT_MIN_BYTES (0: never)
  int host_cpus = 0;              // KOLO_HOST_CPUS, else the CPUs online (0: unknown, never oversubscribed)
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
  // The algorithm for `args` and its wire id (what the stamp carries).
  struct Choice {
    const Algorithm* algorithm;
    uint8_t wire_id;
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

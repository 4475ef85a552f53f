// Which algorithm runs a collective.
//
// A request (Options.algorithm, else KOLO_ALGO) is either one name, applying to every
// collective that has an algorithm of that name (the others choose automatically), or a list
// "allreduce=ring,broadcast=tree" naming collectives one by one. "auto" anywhere means the
// automatic choice. A name that no collective has, a name a listed collective does not have,
// or an unknown collective in a list is refused with InvalidArgument naming the valid
// choices. A requested algorithm that cannot run these arguments (supports() false) gives way
// to the automatic choice.
//
// The automatic choice depends only on the collective, its per-rank bytes, the rank count and
// the host layout (and the tunables, which must therefore be equal on every rank; a rank that
// disagrees stamps another algorithm's wire id: its peers report a mismatch, or time out). Under
// KOLO_SELECT=model (the default unless KOLO_SMALL_BYTES or KOLO_TREE_MAX_BYTES is set) it is
// the algorithm of least predicted time (cost_model.hpp) among those whose supports() accepts
// the call; the threshold rule's choice below is the incumbent and is kept unless another is
// predicted at least 3 % faster, so the model only overrides it where it sees a clear win.
// The threshold rule (KOLO_SELECT=threshold, and the incumbent):
//   two ranks       <= KOLO_SMALL_BYTES: pair (one exchange) for every collective it serves;
//                   above, as below
//   allreduce       <= KOLO_SMALL_BYTES: rd (oneshot on one host of 3-4 ranks while the
//                   P-1 copies it sends stay within 4 KiB); <= KOLO_TREE_MAX_BYTES: tree (ring
//                   with two ranks); above: ring, except twoshot from KOLO_TWOSHOT_MIN_BYTES on
//                   one host of 3-8 ranks that outnumber its CPUs (KOLO_HOST_CPUS)
// Two ranks on one host always take the rule's choice: the model's alpha does not fit them.
//   reduce_scatter  <= KOLO_SMALL_BYTES: direct; above: ring
//   allgather       <= KOLO_SMALL_BYTES: rd (direct on one host of at most 4 ranks); above: ring
//   broadcast       direct (the root sends to each) on one host of 3-4 ranks while the P-1
//                   copies it sends stay within 4 KiB; ring once the buffer is above
//                   KOLO_TREE_MAX_BYTES and spans at least nranks chunks (KOLO_CHUNK_BYTES), so
//                   the chain's pipeline fills; else tree
//   reduce          <= KOLO_SMALL_BYTES: direct (on one host only while the root's P-1
//                   incoming blocks stay within 8 KiB); above: tree
//   gather          on one host of at most 8 ranks: direct. Elsewhere <= KOLO_SMALL_BYTES: tree
//                   (log2 P messages at the root); above: direct (no block is forwarded twice)
//   scatter         direct on one host of at most 4 ranks. Elsewhere <= KOLO_SMALL_BYTES: tree
//                   (on one host only while the whole buffer is within 16 KiB, so that the
//                   blocks it forwards stay small); above: direct
//   alltoall        direct (one round) on one host of 3 or more ranks while a block is within
//                   8 KiB; else pairwise
//   barrier         central (everyone to rank 0 and back) on one host of 3 to 8 ranks; else
//                   dissemination (at 2 ranks it is one exchange)
//   alltoallv: pairwise; send, recv: direct.
// On one host the small-message choices above were measured (scripts/bench/algo-ab.sh, on 2 cores and
// on 16; docs/PERFORMANCE.md): there a small collective runs on the direct path, where an extra
// message costs a ring slot's copy rather than a round's latency, so one round of P-1 messages
// beats log2 P dependent rounds up to 4 ranks (and all-to-all's P-1 rounds up to 8, the most
// measured). The model, fitted to rounds on the engine's path, does not see that: on one host
// it decides above KOLO_SMALL_BYTES only.
// With one rank every algorithm is a local copy; the small-message choice is taken.
// A group spread over several hosts with several ranks on some host (HostLayout::hierarchical)
// takes "hier" for allreduce and broadcast above KOLO_SMALL_BYTES, and for allgather and
// reduce_scatter too when its hosts hold equal consecutive blocks of ranks; the small-message
// choices stay (they are latency-bound, and rd/direct already take log2 P or one round).
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "common/config.hpp"
#include "kolo/error.hpp"

namespace kolo::algo {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t pos; (pos = s.find(sep, start)) != std::string::npos; start = pos + 1) out.push_back(s.substr(start, pos - start));
  out.push_back(s.substr(start));
  return out;
}

std::string valid_names(CollKind kind) {
  std::string out;
  for (const Algorithm* a : all_algorithms()) {
    if (!a->serves.has(kind)) continue;
    if (!out.empty()) out += ", ";
    out += a->name;
  }
  return out + " (or auto)";
}

bool exists_for_some_collective(const std::string& name) {
  for (const Algorithm* a : all_algorithms())
    if (name == a->name) return true;
  return false;
}

std::string refused(const std::string& spec, const std::string& why) {
  return "kolo: algorithm request '" + spec + "' (Options.algorithm or KOLO_ALGO): " + why;
}

void check_name(CollKind kind, const std::string& name, const std::string& spec) {
  if (name != "auto" && find_algorithm(kind, name) == nullptr)
    throw InvalidArgument(refused(spec, std::string(coll_name(kind)) + " has no algorithm '" + name +
                                            "'; valid: " + valid_names(kind)));
}

// The name `spec` asks for `kind`; empty for the automatic choice.
std::string requested_name(CollKind kind, const std::string& spec) {
  const std::string text = trim(spec);
  if (text.empty() || text == "auto") return "";
  if (text.find('=') == std::string::npos && text.find(',') == std::string::npos) {
    if (find_algorithm(kind, text) != nullptr) return text;
    if (exists_for_some_collective(text)) return "";
    throw InvalidArgument(refused(spec, "no collective has an algorithm '" + text + "'; valid for " + coll_name(kind) +
                                            ": " + valid_names(kind)));
  }
  std::string chosen;
  for (const std::string& entry : split(text, ',')) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos)
      throw InvalidArgument(refused(spec, "entry '" + trim(entry) + "' is not of the form collective=algorithm"));
    const std::string coll = trim(entry.substr(0, eq)), name = trim(entry.substr(eq + 1));
    bool known = false;
    for (int k = 0; k < kNumCollKinds; ++k) {
      const auto listed = static_cast<CollKind>(k);
      if (coll != coll_name(listed)) continue;
      known = true;
      check_name(listed, name, spec);
      if (listed == kind) chosen = name == "auto" ? "" : name;
    }
    if (!known) {
      std::string colls;
      for (int k = 0; k < kNumCollKinds; ++k) colls += std::string(k ? ", " : "") + coll_name(static_cast<CollKind>(k));
      throw InvalidArgument(refused(spec, "unknown collective '" + coll + "'; valid: " + colls));
    }
  }
  return chosen;
}

const Algorithm& named(CollKind kind, const char* name) {
  const Algorithm* a = find_algorithm(kind, name);
  if (a == nullptr) throw std::logic_error(std::string("kolo: no ") + coll_name(kind) + " algorithm '" + name + "' registered");
  return *a;
}

// The one-host small-message limits (bytes), measured with scripts/bench/algo-ab.sh at 3, 4 and 8
// ranks on 16 idle cores and at 4 ranks on 2 (docs/PERFORMANCE.md, 2026-11-26).
constexpr int64_t kOneshotMaxBytes = 4 << 10;       // oneshot all-reduce: (P-1) x bytes sent
constexpr int64_t kReduceDirectMaxBytes = 8 << 10;  // direct reduce: (P-1) x bytes into the root
constexpr int64_t kScatterTreeMaxBytes = 16 << 10;  // tree scatter: the root's whole buffer
// Up to 4 ranks on one host the rule takes the direct scatter at every size (above
// KOLO_SMALL_BYTES the model still decides, as for every collective): at 4 ranks on 2 cores the
// tree's forwarding rank made it 0.46-0.78 against direct's 0.29-0.44 us from 16 B to 4 KiB
// (1.46 against 1.05 at 16 KiB; 11 interleaved repetitions of 20 calls); at 3 ranks the binomial
// tree is the same two sends. 8 ranks keep the tree below 16 KiB (measured on 16 cores).
constexpr int kScatterDirectMaxRanks = 4;
constexpr int64_t kAlltoallDirectMaxBytes = 8 << 10;  // direct all-to-all: one block
// Direct broadcast: (P-1) x bytes sent by the root, at 3-4 ranks. Measured on 2 cores (4 ranks:
// 0.4-0.5 against the tree's 0.6-1.0 us up to 512 B, level at 6 KiB sent, slower from 12 KiB).
// At 8 ranks it won there too (0.7 against 0.9-1.5 us), but on 16 idle cores the same shape
// (scatter's root sending 7 blocks) lost to the tree at 8 ranks, so 8 keeps the tree until
// measured there.
constexpr int64_t kBroadcastDirectMaxBytes = 4 << 10;
constexpr int kBroadcastDirectMaxRanks = 4;
// Central barrier: rank 0 takes P-1 arrivals and sends P-1 releases one after the other, which
// beyond a handful of ranks costs more than dissemination's log2 P rounds. Back-to-back barriers
// on 2 cores, central against dissemination: level at 3 ranks, 19-22 against 43-45 us at 8
// (docs/PERFORMANCE.md, 2026-11-27).
constexpr int kBarrierCentralMaxRanks = 8;
// Twoshot instead of the ring where the host's ranks outnumber its CPUs. The ring's 2(P-1)
// rounds each wait for the previous rank, which is often not running (4 ranks on 2 cores: ~700
// context switches per 64 MiB call), and each of its chunks is copied twice (into a slot and out
// of it); twoshot's two rounds of whole blocks are copied once (shared memory's single copy
// from 2 MiB), so every rank that runs has copying to do. Measured on 2 cores, interleaved,
// ring -> twoshot: 3 ranks 8 / 64 MiB 5.4 -> 3.6 / 61.3 -> 51.3 ms; 4 ranks 8 / 16 / 64 MiB
// 6.8 -> 5.6 / 15.0 -> 14.0 / 83.7 -> 74.7; 8 ranks 8 / 64 MiB 21.4 -> 19.9 / 196 -> 155; level
// at 4 ranks at 4 MiB (blocks of 1 MiB go through the slots as the ring's do)
// (docs/PERFORMANCE.md, "Why the code is as it is"). Not measured beyond 8 ranks, nor on idle cores, where the ring stays.
constexpr int kTwoshotMaxRanks = 8;

// One host of 3-8 ranks, more of them than CPUs, and a large all-reduce (the rule above).
bool oversubscribed_twoshot(const CollArgs& args, const HostLayout& hosts, const SelectionTunables& t) {
  const int nranks = hosts.size();
  return args.kind == CollKind::allreduce && t.twoshot_min_bytes > 0 &&
         static_cast<int64_t>(args.bytes()) >= t.twoshot_min_bytes && hosts.num_hosts() == 1 && nranks >= 3 &&
         nranks <= kTwoshotMaxRanks && t.host_cpus > 0 && nranks > t.host_cpus;
}

bool usable(const Algorithm& a, const CollArgs& args, const HostLayout& hosts) { return a.usable(args, hosts); }

// Its prediction for `args` on `shape`, or negative when it has no cost function.
double predicted(const Algorithm& a, const CollArgs& args, const GroupShape& shape, const CostModel& m) {
  return a.cost == nullptr ? -1 : a.cost(CostQuery{args.kind, static_cast<double>(args.bytes()), shape, m});
}

const Algorithm& automatic(const CollArgs& args, const HostLayout& hosts, const SelectionTunables& t) {
  const int nranks = hosts.size();
  const auto bytes = static_cast<int64_t>(args.bytes());
  const int64_t small = t.small_bytes;
  const bool is_small = nranks == 1 || bytes <= small;
  const bool one_host = hosts.num_hosts() == 1;
  if (!is_small && hosts.hierarchical()) {
    const Algorithm* hier = find_algorithm(args.kind, "hier");
    if (hier != nullptr && usable(*hier, args, hosts)) return *hier;
  }
  // Two ranks: every collective is one exchange (pair_exchange.cpp) while small.
  if (nranks == 2 && bytes <= small) {
    const Algorithm* pair = find_algorithm(args.kind, "pair");
    if (pair != nullptr && usable(*pair, args, hosts)) return *pair;
  }
  // What the root receives (reduce, gather) or every rank sends (oneshot): P-1 blocks.
  const int64_t others = bytes * (nranks - 1);
  switch (args.kind) {
    case CollKind::allreduce:
      if (is_small)
        return named(args.kind, one_host && nranks >= 3 && nranks <= 4 && others <= kOneshotMaxBytes ? "oneshot" : "rd");
      // Two ranks: the double binary tree is one edge moving the same bytes as the ring, and
      // the ring splits the reduction between the two (rd reduces all of it on both).
      if (nranks == 2) return named(args.kind, "ring");
      if (oversubscribed_twoshot(args, hosts, t)) return named(args.kind, "twoshot");
      return named(args.kind, bytes <= t.tree_max_bytes ? "tree" : "ring");
    case CollKind::reduce_scatter: return named(args.kind, is_small ? "direct" : "ring");
    case CollKind::allgather: return named(args.kind, !is_small ? "ring" : one_host && nranks <= 4 ? "direct" : "rd");
    case CollKind::broadcast: {
      if (one_host && nranks >= 3 && nranks <= kBroadcastDirectMaxRanks && others <= kBroadcastDirectMaxBytes)
        return named(args.kind, "direct");
      const bool pipeline_fills = bytes > t.tree_max_bytes && bytes / nranks >= t.chunk_bytes;
      return named(args.kind, nranks > 1 && pipeline_fills ? "ring" : "tree");
    }
    case CollKind::reduce:
      return named(args.kind, is_small && !(one_host && others > kReduceDirectMaxBytes) ? "direct" : "tree");
    case CollKind::gather:
      if (one_host && nranks <= 8) return named(args.kind, "direct");
      return named(args.kind, is_small ? "tree" : "direct");
    case CollKind::scatter:
      if (one_host && nranks <= kScatterDirectMaxRanks) return named(args.kind, "direct");
      return named(args.kind, is_small && !(one_host && bytes * nranks > kScatterTreeMaxBytes) ? "tree" : "direct");
    case CollKind::alltoall:
      return named(args.kind, one_host && nranks >= 3 && bytes <= kAlltoallDirectMaxBytes ? "direct" : "pairwise");
    case CollKind::alltoallv: return named(args.kind, "pairwise");
    case CollKind::barrier:
      return named(args.kind, one_host && nranks >= 3 && nranks <= kBarrierCentralMaxRanks ? "central" : "dissemination");
    case CollKind::send:
    case CollKind::recv: return named(args.kind, "direct");
  }
  throw std::logic_error("kolo: no automatic algorithm for collective " + std::to_string(static_cast<int>(args.kind)));
}

constexpr double kChallengerMargin = 0.03;

// The model's choice. Cheap enough for every call: no allocation, one pass over the registry
// (a few dozen entries, most skipped on `kind`) and per candidate its cost function: a handful
// of multiply-adds (cost_model.hpp); the group shape comes from HostLayout in O(1).
const Algorithm& cheapest(const CollArgs& args, const HostLayout& hosts, const SelectionTunables& t,
                          const Algorithm& incumbent) {
  const GroupShape shape = GroupShape::of(hosts);
  double best_time = predicted(incumbent, args, shape, t.model);
  if (best_time < 0) return incumbent;  // a collective the model does not cover
  // A challenger must be predicted clearly faster: exact ties in the model (all-reduce ring and
  // twoshot, reduce-scatter ring and direct: the same bytes in the same number of rounds) keep
  // the threshold rule's choice instead of flipping on rounding, and the model's error is far
  // above this margin anyway.
  best_time *= 1.0 - kChallengerMargin;
  const Algorithm* best = &incumbent;
  for (const Algorithm* a : all_algorithms()) {
    if (a == &incumbent || !usable(*a, args, hosts)) continue;
    const double p = predicted(*a, args, shape, t.model);
    if (p >= 0 && p < best_time) {
      best = a;
      best_time = p;
    }
  }
  return *best;
}

}  // namespace

SelectionTunables SelectionTunables::from_config() {
  SelectionTunables t;
  t.small_bytes = config::get_int("KOLO_SMALL_BYTES");
  t.tree_max_bytes = config::get_int("KOLO_TREE_MAX_BYTES");
  t.chunk_bytes = config::get_int("KOLO_CHUNK_BYTES");
  t.twoshot_min_bytes = config::get_int("KOLO_TWOSHOT_MIN_BYTES");
  // The CPUs online, not this process's affinity: kolorun binds each rank to one CPU when they
  // fit, and every rank of a host must choose alike.
  const int64_t cpus = config::get_int("KOLO_HOST_CPUS");
  t.host_cpus = static_cast<int>(cpus > 0 ? cpus : std::max<long>(0, sysconf(_SC_NPROCESSORS_ONLN)));
  t.algo = config::get_string("KOLO_ALGO");
  const std::string mode = config::get_string("KOLO_SELECT");
  if (mode == "model") t.use_model = true;
  else if (mode == "threshold") t.use_model = false;
  // auto: whoever set a threshold asked for the threshold rule.
  else if (mode == "auto") t.use_model = !config::is_set("KOLO_SMALL_BYTES") && !config::is_set("KOLO_TREE_MAX_BYTES");
  else throw InvalidArgument("KOLO_SELECT='" + mode + "': valid are auto, model, threshold");
  t.model = CostModel::from_config();
  return t;
}

const Algorithm& select_algorithm(const CollArgs& args, const HostLayout& hosts, const std::string& requested,
                                  const SelectionTunables& tunables) {
  const std::string& spec = requested.empty() ? tunables.algo : requested;
  if (!spec.empty()) {
    const std::string name = requested_name(args.kind, spec);
    if (!name.empty()) {
      const Algorithm* a = find_algorithm(args.kind, name);
      if (a != nullptr && usable(*a, args, hosts)) return *a;
    }
  }
  const Algorithm& rule = automatic(args, hosts, tunables);
  // One rank: every algorithm is a local copy, nothing to predict. Two ranks on one host: the
  // model's shared-memory alpha was fitted with more ranks than cores, where every message can
  // wait for a rank to be scheduled; at two ranks it predicts 60 us for a 64 KiB rd all-reduce
  // that takes 11 us here, and so would pick rd over the ring that is 1.1-1.6x faster from
  // 16 KiB (docs/PERFORMANCE.md, issue 12). The rule decides there.
  if (!tunables.use_model || hosts.size() <= 1) return rule;
  if (hosts.size() == 2 && hosts.num_hosts() == 1) return rule;
  // One host, small messages: the direct path's costs, measured (the rule above), not rounds.
  if (hosts.num_hosts() == 1 && static_cast<int64_t>(args.bytes()) <= tunables.small_bytes) return rule;
  // Ranks outnumbering cores: measured, and the model's rounds (fitted there, but equal for the
  // ring and twoshot) do not see the ring's waits for ranks that are not running.
  if (oversubscribed_twoshot(args, hosts, tunables)) return rule;
  return cheapest(args, hosts, tunables, rule);
}

SelectionMemo::Choice SelectionMemo::choose_slow(const CollArgs& args, const HostLayout& hosts, const std::string& requested,
                                                  const SelectionTunables& tunables) {
  // A per-call request is parsed every time (and not remembered): it may differ call by call.
  Entry* e = requested.empty() ? &last_[static_cast<int>(args.kind)] : nullptr;
  const Algorithm& a = select_algorithm(args, hosts, requested, tunables);
  const Choice c{&a, a.wire_id};
  if (e != nullptr) *e = Entry{true, args.bytes(), c};
  return c;
}

const Algorithm& select_algorithm(const CollArgs& args, int nranks, const std::string& requested) {
  return select_algorithm(args, HostLayout::single_host(nranks), requested, SelectionTunables::from_config());
}

}  // namespace kolo::algo

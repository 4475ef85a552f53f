// The formulas of cost_model.hpp, one function per algorithm family. Notation (docs/COST_MODEL.md):
// P ranks, H hosts, L ranks on the fullest host, n per-rank bytes, c the chunk (KOLO_CHUNK_BYTES),
// s = min(c, m) one chunk of a message of m bytes, D = ceil(log2 P).
// A step that moves m bytes costs alpha + beta*m however many chunks it is cut into: the chunks
// of one step are pipelined, so their latencies overlap (alpha, fitted from whole calls, holds
// the per-call overhead too and would be counted many times over per chunk). A pipeline of
// depth d (a chain, a tree's levels) adds d-1 chunk stages to fill before it streams.
// A flat algorithm on a group spanning hosts is timed on the net link (its slowest edge sets
// the pace of every step); a step in which every rank of a host sends across at once (rd's
// high-mask exchanges, direct's all-to-all) pays L * beta_net per byte (one link per host).
#include "algorithms/cost_model.hpp"

#include "algorithms/algorithm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/config.hpp"
#include "kolo/error.hpp"

namespace kolo::algo {
namespace cost {

int ceil_log2(int p) {
  int d = 0;
  while ((1 << d) < p) ++d;
  return d;
}

int floor_pow2(int p) {
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  return p2;
}

// Ring all-reduce: 2(P-1) steps of a segment n/P, P-1 reductions of a segment.
double ring_allreduce(const CostQuery& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  const double seg = n / P;
  return 2.0 * (P - 1) * l.time(seg) + (P - 1) * seg * x.model.gamma;
}

// Recursive doubling all-reduce, every exchange on `l` (one rank per host, or one host).
double rd_allreduce_flat(const CostQuery& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  const int p2 = floor_pow2(P);
  double t = ceil_log2(p2) * (l.time(n) + n * x.model.gamma);
  if (p2 != P) t += 2 * l.time(n) + n * x.model.gamma;  // fold in, result back out
  return t;
}

// Binomial reduce of n bytes to a root: the root takes its D children's n bytes one after
// the other and reduces each (the levels below work meanwhile, a chunk ahead).
double binomial_reduce(const CostQuery& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  return ceil_log2(P) * (l.time(n) + n * x.model.gamma);
}

// Binomial broadcast: the root sends the n bytes to each of its D children in turn.
double binomial_bcast(int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  return ceil_log2(P) * l.time(n);
}

// Chain (ring) broadcast: P-2 chunk stages fill the pipeline, then the n bytes stream through.
double chain_bcast(const CostQuery& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  return (P - 2) * l.time(x.chunk_of(n)) + l.time(n);
}

// Binomial gather/scatter of blocks of n: log2 P messages, (P-1) blocks through the root.
// On one host every block copy shares the host's memory, and the tree's inner ranks store and
// forward: a block moves once per level between the root and its rank (the rank's depth, the
// number of bits set in its distance from the root), (P/2) log2 P blocks in all for a power of
// two against the direct algorithm's P-1. Measured at 4 ranks on 2 cores (docs/PERFORMANCE.md):
// direct beats the tree from 32 KiB blocks, which the count of root messages alone never saw.
double binomial_gather(const CostQuery& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  double blocks = P - 1;
  if (x.shape.hosts == 1) {
    blocks = 0;
    for (int i = 1; i < P; ++i) blocks += __builtin_popcount(static_cast<unsigned>(i));
  }
  return ceil_log2(P) * l.alpha + blocks * n * l.beta;
}

// Ring reduce-scatter / all-gather: P-1 steps of one block (`reduce`: with its reduction).
double ring_pass(const CostQuery& x, int P, double n, const LinkCost& l, bool reduce) {
  if (P <= 1) return 0;
  return (P - 1) * (l.time(n) + (reduce ? n * x.model.gamma : 0));
}

// One round in which every rank sends a block of n to each of the others (direct
// reduce-scatter / all-gather, one phase of twoshot): the messages leave one by one, the bytes
// of a host's L ranks to the P-L ranks elsewhere share the host's net link, the intra-host
// bytes move over shared memory meanwhile.
double all_to_all_round(const CostQuery& x, double n) {
  const GroupShape& g = x.shape;
  const int P = g.ranks, L = g.hosts > 1 ? g.per_host : P;
  if (P <= 1) return 0;
  const double alphas = (L - 1) * x.model.shm.alpha + (P - L) * x.model.net.alpha;
  const double intra = (L - 1) * n * x.model.shm.beta, inter = static_cast<double>(L) * (P - L) * n * x.model.net.beta;
  return alphas + std::max(intra, inter);
}

// P-1 blocks of n into one root (direct reduce / gather; scatter is the mirror image).
double into_root(const CostQuery& x, double n) {
  const GroupShape& g = x.shape;
  const int P = g.ranks, L = g.hosts > 1 ? g.per_host : P;
  if (P <= 1) return 0;
  const double alphas = (L - 1) * x.model.shm.alpha + (P - L) * x.model.net.alpha;
  return alphas + std::max((L - 1) * n * x.model.shm.beta, (P - L) * n * x.model.net.beta);
}

// Recursive doubling over the whole group: with hosts of L consecutive ranks the first
// log2 L exchanges stay inside a host (shared memory), the rest cross with all L ranks of a
// host on its link at once. All-reduce's exchanges are all n and reduce; all-gather's double
// in size (n, 2n, 4n, ...).
double rd_group(const CostQuery& x, double n, bool allreduce) {
  const GroupShape& g = x.shape;
  const int P = g.ranks;
  if (P <= 1) return 0;
  const int p2 = floor_pow2(P), steps = ceil_log2(p2);
  const int intra_steps = g.hosts > 1 ? std::min(steps, ceil_log2(floor_pow2(g.per_host))) : steps;
  const int share = g.hosts > 1 ? g.per_host : 1;
  double t = 0, size = n;
  for (int i = 0; i < steps; ++i) {
    const bool intra = i < intra_steps;
    const LinkCost& l = intra ? x.model.shm : x.model.net;
    t += l.alpha + size * l.beta * (intra ? 1 : share) + (allreduce ? size * x.model.gamma : 0);
    if (!allreduce) size *= 2;
  }
  if (p2 != P) {  // the folded-out ranks' partners are their neighbours: same host when L > 1
    const LinkCost& l = (g.hosts == 1 || g.per_host > 1) ? x.model.shm : x.model.net;
    t += allreduce ? 2 * l.time(n) + n * x.model.gamma : l.time(n) + l.time(P * n);
  }
  return t;
}

}  // namespace cost

LinkCost CostModel::parse_link(const char* name, const std::string& text) {
  const size_t comma = text.find(',');
  const auto bad = [&]() {
    return InvalidArgument(std::string(name) + "='" + text +
                           "' is not 'alpha_us,GBps' (latency in microseconds, bandwidth in GB/s, both > 0)");
  };
  if (comma == std::string::npos) throw bad();
  char* end = nullptr;
  const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
  const double alpha_us = std::strtod(a.c_str(), &end);
  if (a.empty() || *end != '\0' || !(alpha_us >= 0) || !std::isfinite(alpha_us)) throw bad();
  const double gbps = std::strtod(b.c_str(), &end);
  if (b.empty() || *end != '\0' || !(gbps > 0) || !std::isfinite(gbps)) throw bad();
  return LinkCost{alpha_us * 1e-6, 1.0 / (gbps * 1e9)};
}

CostModel CostModel::from_config() {
  CostModel m;
  m.shm = parse_link("KOLO_MODEL_SHM", config::get_string("KOLO_MODEL_SHM"));
  m.net = parse_link("KOLO_MODEL_NET", config::get_string("KOLO_MODEL_NET"));
  const std::string g = config::get_string("KOLO_MODEL_REDUCE_GBPS");
  char* end = nullptr;
  const double gbps = std::strtod(g.c_str(), &end);
  if (g.empty() || *end != '\0' || !(gbps > 0) || !std::isfinite(gbps))
    throw InvalidArgument("KOLO_MODEL_REDUCE_GBPS='" + g + "' is not a reduction rate in GB/s (> 0)");
  m.gamma = 1.0 / (gbps * 1e9);
  m.chunk = static_cast<double>(config::get_int("KOLO_CHUNK_BYTES"));
  return m;
}

GroupShape GroupShape::of(const HostLayout& hosts) {
  GroupShape g;
  g.ranks = std::max(1, hosts.size());
  g.hosts = std::max(1, hosts.num_hosts());
  g.per_host = std::max(1, hosts.max_per_host);
  return g;
}

double predict_seconds(CollKind kind, const char* name, double bytes, const GroupShape& shape, const CostModel& m) {
  const Algorithm* a = find_algorithm(kind, name);
  if (a == nullptr || a->cost == nullptr) return -1;
  return a->cost(CostQuery{kind, bytes, shape, m});
}

}  // namespace kolo::algo

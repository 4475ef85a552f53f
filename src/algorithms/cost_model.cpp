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

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/config.hpp"
#include "kolo/error.hpp"

namespace kolo::algo {
namespace {

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

struct Ctx {
  const GroupShape& g;
  const CostModel& m;
  // A flat algorithm's link: shared memory on one host, else the network.
  const LinkCost& flat() const { return g.hosts > 1 ? m.net : m.shm; }
  double chunk_of(double bytes) const { return m.chunk > 0 ? std::min(m.chunk, bytes) : bytes; }
};

// --- building blocks on P ranks over one link ---------------------------------------------

// Ring all-reduce: 2(P-1) steps of a segment n/P, P-1 reductions of a segment.
double ring_allreduce(const Ctx& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  const double seg = n / P;
  return 2.0 * (P - 1) * l.time(seg) + (P - 1) * seg * x.m.gamma;
}

// Recursive doubling all-reduce, every exchange on `l` (one rank per host, or one host).
double rd_allreduce_flat(const Ctx& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  const int p2 = floor_pow2(P);
  double t = ceil_log2(p2) * (l.time(n) + n * x.m.gamma);
  if (p2 != P) t += 2 * l.time(n) + n * x.m.gamma;  // fold in, result back out
  return t;
}

// Binomial reduce of n bytes to a root: the root takes its D children's n bytes one after
// the other and reduces each (the levels below work meanwhile, a chunk ahead).
double binomial_reduce(const Ctx& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  return ceil_log2(P) * (l.time(n) + n * x.m.gamma);
}

// Binomial broadcast: the root sends the n bytes to each of its D children in turn.
double binomial_bcast(int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  return ceil_log2(P) * l.time(n);
}

// Chain (ring) broadcast: P-2 chunk stages fill the pipeline, then the n bytes stream through.
double chain_bcast(const Ctx& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  return (P - 2) * l.time(x.chunk_of(n)) + l.time(n);
}

// Binomial gather/scatter of blocks of n: log2 P messages, (P-1) blocks through the root.
// On one host every block copy shares the host's memory, and the tree's inner ranks store and
// forward: a block moves once per level between the root and its rank (the rank's depth, the
// number of bits set in its distance from the root), (P/2) log2 P blocks in all for a power of
// two against the direct algorithm's P-1. Measured at 4 ranks on 2 cores (docs/PERFORMANCE.md):
// direct beats the tree from 32 KiB blocks, which the count of root messages alone never saw.
double binomial_gather(const Ctx& x, int P, double n, const LinkCost& l) {
  if (P <= 1) return 0;
  double blocks = P - 1;
  if (x.g.hosts == 1) {
    blocks = 0;
    for (int i = 1; i < P; ++i) blocks += __builtin_popcount(static_cast<unsigned>(i));
  }
  return ceil_log2(P) * l.alpha + blocks * n * l.beta;
}

// Ring reduce-scatter / all-gather: P-1 steps of one block (`reduce`: with its reduction).
double ring_pass(const Ctx& x, int P, double n, const LinkCost& l, bool reduce) {
  if (P <= 1) return 0;
  return (P - 1) * (l.time(n) + (reduce ? n * x.m.gamma : 0));
}

// One round in which every rank sends a block of n to each of the others (direct
// reduce-scatter / all-gather, one phase of twoshot): the messages leave one by one, the bytes
// of a host's L ranks to the P-L ranks elsewhere share the host's net link, the intra-host
// bytes move over shared memory meanwhile.
double all_to_all_round(const Ctx& x, double n) {
  const GroupShape& g = x.g;
  const int P = g.ranks, L = g.hosts > 1 ? g.per_host : P;
  if (P <= 1) return 0;
  const double alphas = (L - 1) * x.m.shm.alpha + (P - L) * x.m.net.alpha;
  const double intra = (L - 1) * n * x.m.shm.beta, inter = static_cast<double>(L) * (P - L) * n * x.m.net.beta;
  return alphas + std::max(intra, inter);
}

// P-1 blocks of n into one root (direct reduce / gather; scatter is the mirror image).
double into_root(const Ctx& x, double n) {
  const GroupShape& g = x.g;
  const int P = g.ranks, L = g.hosts > 1 ? g.per_host : P;
  if (P <= 1) return 0;
  const double alphas = (L - 1) * x.m.shm.alpha + (P - L) * x.m.net.alpha;
  return alphas + std::max((L - 1) * n * x.m.shm.beta, (P - L) * n * x.m.net.beta);
}

// Recursive doubling over the whole group: with hosts of L consecutive ranks the first
// log2 L exchanges stay inside a host (shared memory), the rest cross with all L ranks of a
// host on its link at once. All-reduce's exchanges are all n and reduce; all-gather's double
// in size (n, 2n, 4n, ...).
double rd_group(const Ctx& x, double n, bool allreduce) {
  const GroupShape& g = x.g;
  const int P = g.ranks;
  if (P <= 1) return 0;
  const int p2 = floor_pow2(P), steps = ceil_log2(p2);
  const int intra_steps = g.hosts > 1 ? std::min(steps, ceil_log2(floor_pow2(g.per_host))) : steps;
  const int share = g.hosts > 1 ? g.per_host : 1;
  double t = 0, size = n;
  for (int i = 0; i < steps; ++i) {
    const bool intra = i < intra_steps;
    const LinkCost& l = intra ? x.m.shm : x.m.net;
    t += l.alpha + size * l.beta * (intra ? 1 : share) + (allreduce ? size * x.m.gamma : 0);
    if (!allreduce) size *= 2;
  }
  if (p2 != P) {  // the folded-out ranks' partners are their neighbours: same host when L > 1
    const LinkCost& l = (g.hosts == 1 || g.per_host > 1) ? x.m.shm : x.m.net;
    t += allreduce ? 2 * l.time(n) + n * x.m.gamma : l.time(n) + l.time(P * n);
  }
  return t;
}

// --- the algorithms -------------------------------------------------------------------------

double allreduce(const Ctx& x, const char* name, double n) {
  const GroupShape& g = x.g;
  const int P = g.ranks;
  if (std::strcmp(name, "ring") == 0) return ring_allreduce(x, P, n, x.flat());
  if (std::strcmp(name, "rd") == 0) return rd_group(x, n, true);
  if (std::strcmp(name, "tree") == 0) {
    // Double binary tree: halves of n up and down two trees, pipelined over D levels. A rank
    // takes up to f = 2 children's share of each half (f n/2 bytes in, reduced) and sends one
    // share in each tree, up and then down. Each phase: the first chunk crosses the D levels
    // one after the other, then the rest of the half streams with every level busy.
    // Across hosts the trees are laid over rank order, so a host's block of L ranks has tree
    // edges leaving it from more than one of its ranks: about two per tree and direction (the
    // block's own subtree root, and children at its borders). They share the host's link only
    // while the stream keeps every level busy, not during the first chunk's descent.
    if (P <= 1) return 0;
    const double half = n / 2, s = x.chunk_of(half), fan = std::min(2, P - 1);
    const LinkCost& l = x.flat();
    const double share = g.hosts > 1 ? std::min(2, g.per_host) : 1;
    const double phase = ceil_log2(P) * l.time(fan * s) + fan * (half - s) * l.beta * share;
    return 2 * phase + fan * half * x.m.gamma;
  }
  if (std::strcmp(name, "twoshot") == 0) {
    if (P <= 1) return 0;
    const double seg = n / P;
    return 2 * all_to_all_round(x, seg) + (P - 1) * seg * x.m.gamma;
  }
  if (std::strcmp(name, "hier") == 0) {
    // Reduce to the leader (binomial, shm), the leaders' all-reduce (rd within one chunk, else
    // ring; net), broadcast back (binomial, shm): allreduce_hier.cpp.
    const int H = g.hosts, L = g.per_host;
    const double across = n <= x.m.chunk ? rd_allreduce_flat(x, H, n, x.m.net) : ring_allreduce(x, H, n, x.m.net);
    return binomial_reduce(x, L, n, x.m.shm) + across + binomial_bcast(L, n, x.m.shm);
  }
  return -1;
}

double reduce_scatter(const Ctx& x, const char* name, double n) {
  const GroupShape& g = x.g;
  const int P = g.ranks;
  if (std::strcmp(name, "ring") == 0) return ring_pass(x, P, n, x.flat(), true);
  if (std::strcmp(name, "direct") == 0) return P <= 1 ? 0 : all_to_all_round(x, n) + (P - 1) * n * x.m.gamma;
  if (std::strcmp(name, "hier") == 0) {
    // Whole input to the leader (binomial reduce of P*n, shm), the leaders' reduce-scatter of
    // host blocks L*n (direct within one chunk, else ring; net), scatter to the host (shm).
    const int H = g.hosts, L = g.per_host;
    const double block = static_cast<double>(L) * n;
    const double across = H <= 1 ? 0
                          : block <= x.m.chunk ? (H - 1) * (x.m.net.time(block) + block * x.m.gamma)
                                               : ring_pass(x, H, block, x.m.net, true);
    return binomial_reduce(x, L, static_cast<double>(P) * n, x.m.shm) + across + (L - 1) * x.m.shm.time(n);
  }
  return -1;
}

double allgather(const Ctx& x, const char* name, double n) {
  const GroupShape& g = x.g;
  const int P = g.ranks;
  if (std::strcmp(name, "ring") == 0) return ring_pass(x, P, n, x.flat(), false);
  if (std::strcmp(name, "direct") == 0) return all_to_all_round(x, n);
  if (std::strcmp(name, "rd") == 0) return rd_group(x, n, false);
  if (std::strcmp(name, "hier") == 0) {
    // Gather to the leader (direct, shm), the leaders' all-gather of host regions L*n (rd
    // within one chunk, else ring; net), broadcast of the whole P*n inside the host (shm).
    const int H = g.hosts, L = g.per_host;
    const double block = static_cast<double>(L) * n;
    double across = 0;
    if (H > 1 && block <= x.m.chunk) {
      const int h2 = floor_pow2(H);
      across = ceil_log2(h2) * x.m.net.alpha + (h2 - 1) * block * x.m.net.beta;
      if (h2 != H) across += x.m.net.time(block) + x.m.net.time(H * block);
    } else {
      across = ring_pass(x, H, block, x.m.net, false);
    }
    return (L - 1) * x.m.shm.time(n) + across + binomial_bcast(L, static_cast<double>(P) * n, x.m.shm);
  }
  return -1;
}

double broadcast(const Ctx& x, const char* name, double n) {
  const GroupShape& g = x.g;
  const int P = g.ranks;
  if (std::strcmp(name, "tree") == 0) return binomial_bcast(P, n, x.flat());
  if (std::strcmp(name, "ring") == 0) return chain_bcast(x, P, n, x.flat());
  if (std::strcmp(name, "hier") == 0) {
    // Among the leaders (chain when there are more than two hosts and a host's share spans a
    // chunk, else binomial; net), then inside each host (binomial, shm): broadcast_hier.cpp.
    const int H = g.hosts, L = g.per_host;
    const bool chain = H > 2 && n / H >= x.m.chunk;
    const double across = chain ? chain_bcast(x, H, n, x.m.net) : binomial_bcast(H, n, x.m.net);
    return across + binomial_bcast(L, n, x.m.shm);
  }
  return -1;
}

}  // namespace

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
  const Ctx x{shape, m};
  switch (kind) {
    case CollKind::allreduce: return allreduce(x, name, bytes);
    case CollKind::reduce_scatter: return reduce_scatter(x, name, bytes);
    case CollKind::allgather: return allgather(x, name, bytes);
    case CollKind::broadcast: return broadcast(x, name, bytes);
    case CollKind::reduce:
      if (std::strcmp(name, "direct") == 0) return into_root(x, bytes) + (shape.ranks - 1) * bytes * m.gamma;
      if (std::strcmp(name, "tree") == 0) return binomial_reduce(x, shape.ranks, bytes, x.flat());
      return -1;
    case CollKind::gather:
    case CollKind::scatter:
      if (std::strcmp(name, "direct") == 0) return into_root(x, bytes);
      if (std::strcmp(name, "tree") == 0) return binomial_gather(x, shape.ranks, bytes, x.flat());
      return -1;
    default: return -1;  // one algorithm each: nothing to choose
  }
}

}  // namespace kolo::algo

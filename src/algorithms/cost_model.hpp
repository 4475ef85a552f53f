// The alpha-beta(-gamma) cost model: how long each algorithm should take, from two link classes
// and a reduction rate. docs/COST_MODEL.md derives the formulas and holds the fitted values.
//
// A message of m bytes over a link costs alpha + beta * m (alpha: per-message latency and
// software overhead, beta: seconds per byte); reducing m bytes costs gamma * m. Two link classes:
// `shm` between ranks of one host, `net` between hosts; a host's ranks share its one net link, so
// a step in which all L ranks of a host send across at once pays L * beta_net per byte. The
// formulas follow the algorithms' message schedules (ring: 2(P-1) steps of N/P, rd: log2 P
// exchanges of N, chains and trees: a pipeline whose fill is paid in chunks of
// KOLO_CHUNK_BYTES, hier: its three phases, each with the flat formula on its own link).
//
// Prediction is a handful of multiply-adds and no allocation: it runs on the hot path, once per
// candidate algorithm of every collective a group issues.
#pragma once
#include <algorithm>
#include <string>

#include "algorithms/collective.hpp"
#include "algorithms/host_layout.hpp"

namespace kolo::algo {

struct LinkCost {
  double alpha = 0;  // seconds per message
  double beta = 0;   // seconds per byte
  double time(double bytes) const { return alpha + beta * bytes; }
};

struct CostModel {
  LinkCost shm;        // KOLO_MODEL_SHM
  LinkCost net;        // KOLO_MODEL_NET
  double gamma = 0;    // seconds per byte reduced (KOLO_MODEL_REDUCE_GBPS)
  double chunk = 0;    // pipelining unit in bytes (KOLO_CHUNK_BYTES)
  static CostModel from_config();
  // "alpha_us,GBps" (e.g. "2.5,6.0") -> a link; throws InvalidArgument naming `name` otherwise.
  static LinkCost parse_link(const char* name, const std::string& text);
};

// The shape of a group that the formulas need. Built from a HostLayout in O(1) (its cached
// per-host maximum), so selection can build it per call.
struct GroupShape {
  int ranks = 1;     // P
  int hosts = 1;     // H
  int per_host = 1;  // L: the most ranks on one host
  static GroupShape of(const HostLayout& hosts);
};

// What an algorithm's cost function (Algorithm::cost) is asked: the collective (an algorithm
// may serve several), its per-rank bytes (CollArgs::bytes()), the group's shape and the model.
struct CostQuery {
  CollKind kind;
  double bytes;
  const GroupShape& shape;
  const CostModel& model;
  // A flat algorithm's link: shared memory on one host, else the network (its slowest edge sets
  // the pace of every step).
  const LinkCost& flat() const { return shape.hosts > 1 ? model.net : model.shm; }
  double chunk_of(double b) const { return model.chunk > 0 ? std::min(model.chunk, b) : b; }
};

// The building blocks the algorithms' cost functions are made of (cost_model.cpp, derived in
// docs/COST_MODEL.md). P ranks, n per-rank bytes, over link `l`.
namespace cost {
int ceil_log2(int p);
int floor_pow2(int p);
double ring_allreduce(const CostQuery& q, int P, double n, const LinkCost& l);      // 2(P-1) steps of n/P
double rd_allreduce_flat(const CostQuery& q, int P, double n, const LinkCost& l);   // log2 P exchanges of n
double binomial_reduce(const CostQuery& q, int P, double n, const LinkCost& l);     // D levels into a root
double binomial_bcast(int P, double n, const LinkCost& l);                          // D sends from the root
double chain_bcast(const CostQuery& q, int P, double n, const LinkCost& l);         // a pipelined chain
double binomial_gather(const CostQuery& q, int P, double n, const LinkCost& l);     // blocks through a tree
double ring_pass(const CostQuery& q, int P, double n, const LinkCost& l, bool reduce);  // P-1 steps of n
double all_to_all_round(const CostQuery& q, double n);  // every rank sends n to each other rank
double into_root(const CostQuery& q, double n);         // P-1 blocks of n into one rank
double rd_group(const CostQuery& q, double n, bool allreduce);  // recursive doubling over the group
}  // namespace cost

// Predicted seconds for the algorithm of collective `kind` named `name` (its descriptor's
// cost function), or a negative value when there is none or it has no cost function.
double predict_seconds(CollKind kind, const char* name, double bytes, const GroupShape& shape, const CostModel& m);

}  // namespace kolo::algo

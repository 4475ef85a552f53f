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

// Predicted seconds for algorithm `name` of collective `kind` on `bytes` per-rank bytes
// (CollArgs::bytes()), or a negative value when the model has no formula for it.
double predict_seconds(CollKind kind, const char* name, double bytes, const GroupShape& shape, const CostModel& m);

}  // namespace kolo::algo

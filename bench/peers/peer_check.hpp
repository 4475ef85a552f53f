// Check mode (-c 1): poison every output, fill every rank's inputs from a ValuePlan, run once,
// then count the output elements that differ from the result computed from the same plan.
#pragma once
#include <cstddef>
#include <cstdint>

#include "peer_collectives.hpp"
#include "peer_types.hpp"
#include "peer_values.hpp"

namespace kolo::peers {

struct CheckContext {
  const CollectiveSpec* spec;
  Shape shape;
  ElementType type;
  int rank;
  int nranks;
  int root;
  bool in_place;
};

// Poisons this rank's outputs, then writes its inputs (in place, over the poison).
void fill_inputs(const CheckContext& c, const Placement& where, const ValuePlan& plan);

// Cheap inputs for the timed runs (small integers, valid in every type), so the timing never
// reads uninitialised memory or denormal floats.
void fill_for_timing(const CheckContext& c, const Placement& where);

// The number of this rank's output elements that are wrong (a non-root rank of reduce: 0).
// Prints the first few mismatches to stderr, naming the program, the rank and the index.
int64_t count_wrong(const CheckContext& c, const Placement& where, const ValuePlan& plan, const char* program);

}  // namespace kolo::peers

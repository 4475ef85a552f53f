// Check mode (-c N): poison every output, fill every rank's inputs from a ValuePlan, run once,
// then count the output elements that differ from the result computed from the same plan (never
// from the library under test).
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "collective_specs.hpp"
#include "elements.hpp"
#include "values.hpp"

namespace kolo::bench {

struct CheckContext {
  const CollectiveSpec* spec;
  Shape shape;
  ElementType type;
  int rank;
  int nranks;
  int root;
  bool in_place;
};

// Poisons this rank's outputs, then writes its inputs (in place, over the poison). Ranks with no
// input (broadcast's and scatter's non-roots) write nothing, so their poison stays.
void fill_inputs(const CheckContext& c, const Placement& where, const ValuePlan& plan);

// Cheap inputs for the timed runs (small integers, valid in every type), so the timing never
// reads uninitialised memory or denormal floats (the peers fill before timing; kolo-perf keeps
// what the buffers hold, harness.hpp).
void fill_for_timing(const CheckContext& c, const Placement& where);

// Flips the bits of this rank's first output element (ranks with no output: nothing), so that
// tests can prove that a wrong result is counted and ends in exit status 7 (--inject-wrong).
void spoil_first_output(const CheckContext& c, const Placement& where);

// The number of this rank's output elements that are wrong (ranks with no output: 0).
// Prints the first few mismatches to stderr, naming the program, the rank and the index.
int64_t count_wrong(const CheckContext& c, const Placement& where, const ValuePlan& plan, const char* program);

}  // namespace kolo::bench

// Check mode (-c 1): fill every rank's inputs from a ValuePlan, then count the output elements
// that differ from the result computed from the same plan (never from kolo).
#pragma once
#include <cstddef>
#include <cstdint>

#include "collectives.hpp"
#include "placement.hpp"
#include "values.hpp"

namespace kolo::perf {

struct CheckContext {
  const CollectiveSpec* spec;
  Shape shape;
  int rank;
  int nranks;
  int root;
  bool in_place;
};

// Poisons this rank's outputs, then writes its inputs (in place, into the receive buffer).
void fill_inputs(const CheckContext& c, const Placement& where, const ValuePlan& plan);

// Flips the bits of this rank's first output element (ranks with no output: nothing), so that
// tests can prove that a wrong result is counted and ends in exit status 7 (--inject-wrong).
void spoil_first_output(const CheckContext& c, const Placement& where);

// The number of this rank's output elements that are wrong (ranks with no output: 0).
// Prints the first few mismatches to stderr, naming the rank and the index.
int64_t count_wrong(const CheckContext& c, const Placement& where, const ValuePlan& plan);

}  // namespace kolo::perf

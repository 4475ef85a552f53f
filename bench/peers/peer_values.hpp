// Input values whose collective results are known exactly (the idea of bench/perf/values.hpp,
// for the types and operators the peers have). Every value is a small integer, so no partial
// result of any reduction order overflows or rounds, and the expected result is computed here in
// 64-bit integers, independently of the library under test:
//   sum        |value| <= exact / nranks    (exact: 127 for int8, 2^24 for float, ...)
//   prod       1 or 2 (random sign on signed types); a 2 only on the first few ranks, so the
//              product stays within the type
//   min, max   and data movement: anything up to min(exact, 2^20)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "peer_types.hpp"

namespace kolo::peers {

class ValuePlan {
 public:
  // op == nullptr: data movement (broadcast, allgather, alltoall). `salt` changes every value,
  // so a stale result from an earlier run cannot pass a check.
  ValuePlan(ElementType type, const ReduceKind* op, int nranks, uint64_t salt);

  int64_t input(int rank, size_t index) const;
  int64_t reduced(size_t index) const;  // the reduction of input(0..nranks-1, index)

 private:
  bool reduction_;
  ReduceKind kind_ = ReduceKind::sum;
  int nranks_;
  uint64_t salt_;
  bool signed_;
  int64_t sum_bound_;
  int64_t any_bound_;
  int prod_ranks_;  // ranks below this may contribute a factor 2
};

// Element `index` of an array of type t, written from / compared with an exact integer.
void store_value(ElementType t, void* base, size_t index, int64_t value);
bool holds_value(ElementType t, const void* base, size_t index, int64_t expected);
std::string element_text(ElementType t, const void* base, size_t index);

}  // namespace kolo::peers

// Input values whose collective results are known exactly, for every element type and operator
// (elements.hpp), shared by kolo-perf and the peers, so every program checks the same values.
//
// Every value is an integer (bitwise ops: a bit pattern) small enough that no partial result of
// any reduction order overflows the type or rounds in it, so the expected result is computed
// here in 64-bit integers, independently of the library under test, and compared element by element:
//   sum, premulsum   |value| <= limit / nranks (premulsum: / (2 nranks), its factor is 2)
//   avg              rank pairs get a+t and a-t (an odd rank count leaves one a): the sum is
//                    exactly nranks*a, so the average a is exact even in integer types
//   prod             1 or 2 (with a random sign on signed types); a 2 only on the first
//                    `bits` ranks, so the product stays within the type
//   min, max         anything the type holds exactly
//   band, bor, bxor  random bit patterns (mostly ones for band, sparse for bor)
// where `limit` is what the type holds exactly: 127 for int8, 256 for bfloat16, 2048 for float16...
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "elements.hpp"

namespace kolo::bench {

// premulsum's factor, the one every program runs it with: a power of two, so multiplying never
// rounds.
constexpr double kPremulFactor = 2.0;

// Writes the integer (or bit pattern) `value` as element `index` of an array of type `t`.
void store_value(ElementType t, void* base, size_t index, int64_t value);
// Whether element `index` equals `expected` exactly (floating types compare values, integer
// types the low bits of the pattern).
bool holds_value(ElementType t, const void* base, size_t index, int64_t expected);
// The element as text, for diagnostics.
std::string element_text(ElementType t, const void* base, size_t index);

// The values of one measurement: what rank r puts at index i, and what a reduction over all
// ranks gives at index i. `salt` changes every value, so a stale result from an earlier run
// cannot pass a check.
class ValuePlan {
 public:
  // For data movement pass op = nullptr: values are then unique-looking numbers.
  ValuePlan(ElementType type, const RedOp* op, int nranks, uint64_t salt);

  int64_t input(int rank, size_t index) const;
  int64_t reduced(size_t index) const;  // the reduction of input(0..nranks-1, index)

 private:
  bool reduction_;
  RedOp kind_ = RedOp::sum;
  int nranks_;
  uint64_t salt_;
  bool signed_;
  int64_t sum_bound_;   // |input| bound for sum-like ops
  int64_t any_bound_;   // |input| bound for min/max and data movement
  int prod_bits_;       // how many ranks may contribute a factor 2
  int width_bits_;      // integer types: the type's width (bitwise ops)
};

}  // namespace kolo::bench

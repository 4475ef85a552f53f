// The test oracle: the formulas that make every input, and the exact result each collective
// must produce from them, computed here in long double (64-bit mantissa: every int64/uint64
// and every value below is exact) without calling kolo.
//
// Inputs are integers (halves for float premul_sum results) chosen so that no partial result
// in any reduction order overflows or rounds, even in int8, float16 or bfloat16:
//   sum / premul_sum  |x| <= limit / nranks (integer premul_sum: / 2 nranks, its factor is 2;
//                      floating premul_sum uses 0.5)
//   avg               a(i) + ((r+i) mod n) - ((r+i+1) mod n): the offsets cancel over all ranks,
//                      so the sum is n*a(i) and the average a(i) exactly, in integer types too
//   prod              1 or 2 with a sign, a 2 on at most `prod_twos` ranks
//   min / max         anything the type holds exactly
//   band / bor / bxor bit patterns of the type's width
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/types.hpp"

namespace kolo::coltest {

// The operator the tests run for `kind` on type `t` (premul_sum: factor 2 on integers, 0.5 on
// floating types).
ReduceOp test_op(ReduceKind kind, DataType t);
bool op_valid_for(ReduceKind kind, DataType t);  // bitwise ops need an integer type

// What rank `rank` holds at `index` for data movement collectives; `salt` varies it per case.
long double data_value(DataType t, int rank, size_t index, uint32_t salt);

// A reduction's inputs and result, with everything that depends only on (type, op, nranks)
// worked out once: the hot path of large cases.
class ReduceReference {
 public:
  ReduceReference(DataType t, const ReduceOp& op, int nranks);
  // What rank `rank` contributes at `index`.
  long double input(int rank, size_t index) const;
  // The result of the reduction over all ranks at `index`.
  long double expected(size_t index) const;

 private:
  int64_t integer_input(int rank, size_t index) const;  // every op but the bitwise ones
  uint64_t pattern_input(int rank, size_t index) const;  // bitwise ops
  long double pattern_as_value(uint64_t pattern) const;

  DataType dtype_;
  ReduceOp op_;
  int nranks_;
  bool signed_;
  int width_;
  int prod_twos_;
  int64_t bound_;  // |input| bound of sum-like ops
};

// Conveniences for a single element.
long double reduce_input(DataType t, const ReduceOp& op, int nranks, int rank, size_t index);
long double reduce_expected(DataType t, const ReduceOp& op, int nranks, size_t index);

// Typed element access: store converts the (exact) value to the element type.
void store_element(DataType t, void* base, size_t index, long double value);
long double load_element(DataType t, const void* base, size_t index);

// float16 / bfloat16 encodings written for the tests (exact values only).
uint16_t half_bits(float value);
float half_value(uint16_t bits);
uint16_t bfloat16_bits(float value);
float bfloat16_value(uint16_t bits);

std::string value_text(long double v);

}  // namespace kolo::coltest

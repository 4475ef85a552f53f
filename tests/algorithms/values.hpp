// Test data for the algorithm tests, written independently of the kernels: inputs are small
// integers derived from (rank, index), so every partial result is exact in every dtype
// (float16 and bfloat16 included), and expected results are computed in int64 / double
// straight from the formula.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/types.hpp"

namespace kolo::testing {

bool is_float_type(DataType t);
bool is_signed_type(DataType t);
int bit_width(DataType t);

// Element access on a typed buffer. store_value wants a value the type holds exactly (it
// throws otherwise, so a test cannot silently feed rounded inputs); integers wrap to width.
void store_value(DataType t, void* base, size_t i, double v);
double load_value(DataType t, const void* base, size_t i);  // exact for every type used here
uint64_t load_bits(DataType t, const void* base, size_t i);  // raw bits, zero-extended

// Input of `rank` at input position `input_index` for a reduction with `op` over `nranks`
// ranks (not for bitwise ops, whose inputs are bit patterns: see store_input).
double reduction_input(ReduceOp op, DataType t, int nranks, int rank, size_t input_index);
// Expected value at input position `input_index`; for bitwise ops the raw bits.
double expected_reduction(ReduceOp op, DataType t, int nranks, size_t input_index);
uint64_t expected_bits(ReduceOp op, DataType t, int nranks, size_t input_index);
// Writes rank's input for position `input_index` into element i of `base`.
void store_input(ReduceOp op, DataType t, void* base, size_t i, int nranks, int rank, size_t input_index);
// Compares element i of `got` with the expectation for position `input_index`; returns ""
// or a description.
std::string check_reduced(ReduceOp op, DataType t, int nranks, const void* got, size_t i, size_t input_index);

// The ops that apply to a type (no bitwise ops on floating types), with premul_sum's factor.
std::vector<ReduceOp> ops_for(DataType t);
std::vector<DataType> all_dtypes();
std::string describe(ReduceOp op);

// Data-movement pattern: byte k of element i of rank `src`'s data.
uint8_t pattern_byte(int src, size_t i, size_t k);
void fill_pattern(void* base, size_t count, size_t elem_size, int src, size_t first_index = 0);
// "" if elements [0, count) of `got` equal rank src's pattern from first_index on.
std::string check_pattern(const void* got, size_t count, size_t elem_size, int src, size_t first_index = 0);

// memcmp that accepts empty ranges with null pointers (std::vector::data() of an empty vector).
bool same_bytes(const void* a, const void* b, size_t n);

// A buffer with guard bytes on both sides, to catch writes outside the buffer.
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(size_t bytes, uint8_t fill = 0xEE);
  unsigned char* data() { return mem_.data() + kGuard; }
  const unsigned char* data() const { return mem_.data() + kGuard; }
  size_t bytes() const { return bytes_; }
  bool guards_intact() const;

 private:
  static constexpr size_t kGuard = 64;
  std::vector<unsigned char> mem_;
  size_t bytes_ = 0;
};

}  // namespace kolo::testing

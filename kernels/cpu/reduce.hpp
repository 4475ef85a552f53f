// CPU reduction kernels: every dtype x op of the API. AVX-512 where the CPU has it (chosen once
// at run time), a portable loop everywhere else. float16/bfloat16 go through float32 per pair.
#pragma once
#include <cstddef>
#include <cstdint>
#include "kolo/types.hpp"

namespace kolo::kernels {

// dst[i] = dst[i] (op) src[i]. For avg and premul_sum this is a plain sum: their scaling is
// applied once, by finalize(), to the fully reduced result.
void reduce_inplace(DataType t, ReduceKind op, void* dst, const void* src, size_t count);
// dst[i] = a[i] (op) b[i]; dst may alias a or b.
void reduce(DataType t, ReduceKind op, void* dst, const void* a, const void* b, size_t count);
// The last step of avg (divide by nranks; integer division for integer types) and premul_sum
// (multiply by op.factor); a no-op for every other op.
void finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks);
// Whether the AVX-512 path is in use (for logs and benchmarks).
bool using_avx512();

// float32 <-> float16 / bfloat16 conversion (round to nearest even), with the active table's
// kernels: what DDP's gradient compression packs and unpacks with.
void float_to_half(const float* src, uint16_t* dst, size_t count);
void half_to_float(const uint16_t* src, float* dst, size_t count);
void float_to_bfloat16(const float* src, uint16_t* dst, size_t count);
void bfloat16_to_float(const uint16_t* src, float* dst, size_t count);

}  // namespace kolo::kernels

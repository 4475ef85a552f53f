// Internal: the communication hooks of DistributedDataParallel. A compressed bucket travels as
// 16-bit floats: packed from the float32 gradients before its all-reduce, unpacked after.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kolo/ddp.hpp"
#include "kolo/types.hpp"

namespace kolo::ddp {

// The dtype a bucket travels in.
DataType wire_dtype(GradCompression c);
const char* compression_name(GradCompression c);
// float32 -> float16/bfloat16 (round to nearest, ties to even) and back (exact). `c` must not be none.
void pack(GradCompression c, const float* src, uint16_t* dst, size_t count);
void unpack(GradCompression c, const uint16_t* src, float* dst, size_t count);

}  // namespace kolo::ddp

// Conversions go through the active kernel table (AVX-512 where the CPU has it), which rounds
// to nearest-even exactly as kernels/cpu/half.hpp does on every path.
#include "ddp/compression.hpp"

#include "kernels/cpu/reduce.hpp"
#include "kolo/error.hpp"

namespace kolo::ddp {

DataType wire_dtype(GradCompression c) {
  switch (c) {
    case GradCompression::none: return DataType::float32;
    case GradCompression::float16: return DataType::float16;
    case GradCompression::bfloat16: return DataType::bfloat16;
  }
  throw InvalidArgument("kolo: DistributedDataParallel: unknown GradCompression " + std::to_string(static_cast<int>(c)));
}

const char* compression_name(GradCompression c) {
  switch (c) {
    case GradCompression::none: return "none";
    case GradCompression::float16: return "float16";
    case GradCompression::bfloat16: return "bfloat16";
  }
  return "unknown";
}

void pack(GradCompression c, const float* src, uint16_t* dst, size_t count) {
  if (c == GradCompression::float16) {
    kernels::float_to_half(src, dst, count);
  } else if (c == GradCompression::bfloat16) {
    kernels::float_to_bfloat16(src, dst, count);
  } else {
    throw InvalidArgument("kolo: DistributedDataParallel: pack() without compression");
  }
}

void unpack(GradCompression c, const uint16_t* src, float* dst, size_t count) {
  if (c == GradCompression::float16) {
    kernels::half_to_float(src, dst, count);
  } else if (c == GradCompression::bfloat16) {
    kernels::bfloat16_to_float(src, dst, count);
  } else {
    throw InvalidArgument("kolo: DistributedDataParallel: unpack() without compression");
  }
}

}  // namespace kolo::ddp

// The CUDA reduction kernels as plain C++: no CUDA header is needed to include this, so the
// engine and the algorithms (compiled by the host compiler, not nvcc) can launch device
// reductions. A stream is passed as an opaque pointer: a cudaStream_t cast to void*, nullptr
// for the legacy default stream.
//
// Only built when CUDA is found at configure time (meson: kolo_cuda_found). Without a GPU or
// a driver at run time, cuda_available() answers false; the kernel entry points then fail
// with kolo::Error (never an abort).
//
// Semantics match the CPU kernels (kernels/cpu/reduce.hpp) element for element:
//  - integers wrap around; floating min/max propagate NaN and order -0 below +0;
//  - float16/bfloat16 are widened to float32, reduced, rounded back to nearest-even;
//  - avg and premul_sum reduce as sum; finalize() applies the division/multiplication once;
//  - band/bor/bxor exist for integer types only (InvalidArgument for floating types).
// Pointers must be device-accessible and aligned to their element size; dst may be exactly
// a or b (or both), but must not partially overlap them. Every call is asynchronous on the
// stream; argument errors are thrown before anything is launched, launch errors are thrown
// as kolo::Error carrying cudaGetErrorString's text, and faults inside a kernel surface at
// the caller's next synchronization.
#pragma once
#include <cstddef>
#include <string>
#include "kolo/types.hpp"

namespace kolo::kernels {

// The outcome of asking the CUDA runtime for devices, made once per process.
struct CudaProbe {
  int device_count = 0;
  std::string error;  // why there is no device (cudaGetDeviceCount's message), empty otherwise
};
const CudaProbe& cuda_probe();
// At least one CUDA device is usable: false when there is no GPU or no (or too old a) driver.
bool cuda_available();

namespace cuda {

// dst[i] = a[i] (op) b[i].
void reduce(DataType t, ReduceKind op, void* dst, const void* a, const void* b, size_t count, void* stream);
// dst[i] = dst[i] (op) src[i].
void reduce_inplace(DataType t, ReduceKind op, void* dst, const void* src, size_t count, void* stream);
// dst1[i] = dst2[i] = a[i] (op) b[i] in one pass: the reduce-and-forward step of ring and
// tree algorithms (keep the partial result and hand the same bytes to the next peer).
void reduce_copy2(DataType t, ReduceKind op, void* dst1, void* dst2, const void* a, const void* b, size_t count,
                  void* stream);
// avg: divide by nranks; premul_sum: multiply by op.factor; nothing for the other ops.
// Rounding as the CPU finalize (kernels/cpu/finalize.cpp).
void finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks, void* stream);

}  // namespace cuda
}  // namespace kolo::kernels

// Internal: what the host-side dispatcher (reduce.cpp) calls in the nvcc-compiled kernel files,
// one set of launchers per dtype family so each family is its own translation unit (nvcc time
// grows with the number of kernel instantiations in a file), plus the device queries they share.
// Arguments arrive validated: known dtype and op, bitwise ops only on integers, non-null
// element-aligned pointers, count > 0, nranks > 0 for avg.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include "kolo/types.hpp"

namespace kolo::kernels::cuda::detail {

// dst1 = a (op) b, and dst2 = the same result when dst2 is not null.
struct ReduceTargets {
  void* dst1;
  void* dst2;
  const void* a;
  const void* b;
};

// int8, uint8, int32, uint32, int64, uint64 (reduce_integers.cu).
void launch_integer_reduce(DataType t, ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream);
void launch_integer_finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks, cudaStream_t stream);
// float32, float64 (reduce_floats.cu).
void launch_float_reduce(DataType t, ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream);
void launch_float_finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks, cudaStream_t stream);
// float16, bfloat16 (reduce_halves.cu).
void launch_half_reduce(DataType t, ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream);
void launch_half_finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks, cudaStream_t stream);

// Throws kolo::Error("<what>: <cudaGetErrorString>") unless status is cudaSuccess.
void check(cudaError_t status, const std::string& what);
// Streaming multiprocessors of the current device, queried once per device.
int sm_count();

}  // namespace kolo::kernels::cuda::detail

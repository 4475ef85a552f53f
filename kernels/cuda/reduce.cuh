// The CUDA reduction kernels with typed streams, for callers that include the CUDA runtime
// header anyway (nvcc-compiled code, tests, benchmarks). Code that must build without CUDA
// headers uses kernels/cuda/cuda_api.hpp, whose overloads take the stream as void*; both
// document the same semantics (see cuda_api.hpp). Calling with a literal nullptr stream where
// both headers are included is ambiguous: pass cudaStream_t{} (or a cast) instead.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include "kernels/cuda/cuda_api.hpp"
#include "kolo/types.hpp"

namespace kolo::kernels::cuda {

void reduce(DataType t, ReduceKind op, void* dst, const void* a, const void* b, size_t count, cudaStream_t stream);
void reduce_inplace(DataType t, ReduceKind op, void* dst, const void* src, size_t count, cudaStream_t stream);
void reduce_copy2(DataType t, ReduceKind op, void* dst1, void* dst2, const void* a, const void* b, size_t count,
                  cudaStream_t stream);
void finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks, cudaStream_t stream);

}  // namespace kolo::kernels::cuda

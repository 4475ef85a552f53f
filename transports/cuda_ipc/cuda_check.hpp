// Turning a failed CUDA runtime call into kolo::Error, for the cuda_ipc layer. Header-only so
// that the nvcc-compiled kernels and the host files share it without a link dependency.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include "kolo/error.hpp"

namespace kolo::cuda_ipc {

inline void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  // Reading the error clears a sticky-free error, so it does not resurface at the next call.
  (void)cudaGetLastError();
  throw Error(std::string("cuda_ipc: ") + what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

}  // namespace kolo::cuda_ipc

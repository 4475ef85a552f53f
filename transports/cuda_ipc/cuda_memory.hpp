// IpcMemory on a real GPU (ipc_memory.hpp): cuPointerGetAttributes for the allocation a pointer
// lies in, cudaIpcGetMemHandle / cudaIpcOpenMemHandle / cudaIpcCloseMemHandle for handles, and
// copies on a non-blocking stream of the queue's own whose completion is an event queried with
// cudaEventQuery. Built only with CUDA.
#pragma once
#include <string>
#include "transports/cuda_ipc/ipc_memory.hpp"

namespace kolo::cuda_ipc {

// The process's one instance (it holds no state but the driver's entry point).
IpcMemory& cuda_memory();

// Whether this process can use a GPU; if not, why (no driver, no device), for tests to skip.
bool cuda_device_usable(std::string* why);

}  // namespace kolo::cuda_ipc

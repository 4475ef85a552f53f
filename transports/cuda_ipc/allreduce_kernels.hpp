// The device side of the cuda_ipc all-reduce: sum kernels that read several ranks' buffers
// (peers' buffers are mapped into this process by cudaIpcOpenMemHandle, so they are ordinary
// device pointers here). Plain C++ interface: callers need only the CUDA runtime header.
//
// No kernel here waits on anything another process does: ranks sharing a GPU without MPS
// time-slice it, and a kernel spinning on a peer's flag could hold the GPU for a whole slice
// while the peer cannot run. Ordering across processes is the host's job (ipc_comm.cpp, with
// IPC events) before these kernels are launched.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include "kolo/types.hpp"
#include "transports/cuda_ipc/limits.hpp"

namespace kolo::cuda_ipc {

// The element types these kernels sum (float16/bfloat16 accumulate in float32, round once).
bool allreduce_supports(DataType t);
size_t element_size(DataType t);

// dsts[d][i] = srcs[0][i] + srcs[1][i] + ... + srcs[n-1][i] for i in [begin, end) and every
// d < ndst (ndst is 1 or n), summed in rank order so that every rank computing the same range gets the same
// bits (several destinations: one rank's slice written straight into every rank's output).
// 16-byte vector loads and stores when every pointer at `begin` is 16-byte aligned, a scalar
// path otherwise. A destination may equal a source only if no other process reads that range
// meanwhile (the caller's concern). Asynchronous on stream.
void launch_sum(DataType t, void* const* dsts, int ndst, const void* const* srcs, int n, size_t begin, size_t end,
                cudaStream_t stream);

}  // namespace kolo::cuda_ipc

// IpcMemory without a GPU (ipc_memory.hpp): "device" allocations are ranges of one shared
// mapping of this process (MAP_SHARED, reserved once, pages on first touch), an exported handle
// is (offset, size, allocation id), and opening one gives the same bytes at base + offset, as a
// peer's mapping of a cudaMalloc block does; opening the handle of an allocation freed since
// fails, as cudaIpcOpenMemHandle does. A copy is a memmove run only when it is reported
// complete, at the second look (done()) after its posting: a caller that uses its bytes early
// reads stale ones, as on a GPU, and the paths for a copy in flight run too. One arena per
// process: the ranks it serves are threads (the transport conformance suite's), which is what
// lets CI run the cuda_ipc pair's whole protocol (ipc_pair.hpp) with no GPU.
#pragma once
#include "transports/cuda_ipc/ipc_memory.hpp"

namespace kolo::cuda_ipc {

IpcMemory& standin_memory();

}  // namespace kolo::cuda_ipc

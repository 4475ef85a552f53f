// What the cuda_ipc layer needs of a GPU's memory, as a small interface: which allocation a
// pointer lies in, exporting an allocation as a handle another process can open, opening and
// closing such handles, and asynchronous device-to-device copies whose completion is asked
// without blocking. CudaMemory (cuda_memory.hpp, built with CUDA) is the real one: IPC memory
// handles, cudaMemcpyAsync on a stream of its own, events queried with cudaEventQuery.
// StandinMemory (standin_memory.hpp, always built) keeps "device" allocations in one shared
// host mapping, where a handle is an offset: the registration cache and the pair's protocol
// (ipc_pair.hpp) run on it unchanged on a machine without a GPU, which is how CI tests them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kolo::cuda_ipc {

// The allocation a device pointer lies in.
struct AllocationRange {
  uintptr_t base = 0;
  size_t size = 0;
  uint64_t buffer_id = 0;  // unique per allocation in the process: tells a reallocation at the same base
  // The allocation can be exported: plain cudaMalloc memory. Managed memory, a stream-ordered
  // pool's (cudaMallocAsync) and cuMemCreate's (PyTorch's expandable segments) cannot.
  bool exportable = false;
};

// Copies in posting order on one stream; each has a number (1, 2, ...), and the numbers up to
// done() have completed. Owned by one thread (the one that drives a device's progress).
class CopyQueue {
 public:
  virtual ~CopyQueue() = default;
  // Enqueues dst <- src (device memory, either side possibly a peer's mapping); its number.
  virtual uint64_t copy(void* dst, const void* src, size_t bytes) = 0;
  // The highest number known complete; never blocks (cudaEventQuery).
  virtual uint64_t done() = 0;
  // Waits for every posted copy, for a pair that fails: its requests' buffers are the caller's
  // again at once. Bounded: a copy waits on nothing another process does.
  virtual void drain() = 0;
};

class IpcMemory {
 public:
  virtual ~IpcMemory() = default;
  virtual const char* name() const = 0;
  // Throws kolo::InvalidArgument when ptr is not device memory of this process.
  virtual AllocationRange allocation_of(const void* ptr) = 0;
  // A handle to the exportable allocation at `base` (opaque bytes, sent through the store).
  virtual std::string export_handle(uintptr_t base) = 0;
  // Maps a handle another process exported; the base of the allocation here.
  virtual char* open_handle(const std::string& handle) = 0;
  virtual void close_handle(char* base) = 0;
  virtual std::unique_ptr<CopyQueue> copy_queue() = 0;
  // Exportable device memory, and host <-> device copies that block: for the pair's staging
  // ring and for tests.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  virtual void to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void to_host(void* dst, const void* src, size_t bytes) = 0;
};

}  // namespace kolo::cuda_ipc

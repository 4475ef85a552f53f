// A device buffer the communicator owns, from cudaMalloc so that it can be exported. Where a
// caller's buffer cannot be (managed memory, a stream-ordered pool's, cuMemCreate's: PyTorch's
// expandable segments), a call copies it here first and peers read, or write, this one instead
// (ipc_comm.cpp, begin_call). One copy more on the caller's stream, and the collective works on
// any device memory, with the same choice of path on every rank.
#pragma once
#include <cstddef>

namespace kolo::cuda_ipc {

class RegistrationCache;

class BounceBuffer {
 public:
  explicit BounceBuffer(RegistrationCache& cache) : cache_(cache) {}
  ~BounceBuffer();
  BounceBuffer(const BounceBuffer&) = delete;
  BounceBuffer& operator=(const BounceBuffer&) = delete;

  // At least `bytes` of device memory (sizes grow by doubling, from 1 MiB). Growing retires the
  // old registration, so peers close their mappings at their next call, and frees it:
  // cudaFree waits for the device, so no kernel of an earlier call still reads it.
  void* get(size_t bytes);

 private:
  RegistrationCache& cache_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kolo::cuda_ipc

// BounceBuffer (see bounce_buffer.hpp).
#include "transports/cuda_ipc/bounce_buffer.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include "transports/cuda_ipc/cuda_check.hpp"
#include "transports/cuda_ipc/registration_cache.hpp"

namespace kolo::cuda_ipc {

BounceBuffer::~BounceBuffer() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);  // the comm's close retired the registration
}

void* BounceBuffer::get(size_t bytes) {
  if (bytes <= bytes_) return ptr_;
  size_t want = std::max<size_t>(bytes_ * 2, size_t{1} << 20);
  while (want < bytes) want *= 2;
  if (ptr_ != nullptr) {
    cache_.deregister(ptr_);
    check(cudaFree(ptr_), "cudaFree (bounce buffer)");
    ptr_ = nullptr;
    bytes_ = 0;
  }
  check(cudaMalloc(&ptr_, want), "cudaMalloc (bounce buffer)");
  bytes_ = want;
  return ptr_;
}

}  // namespace kolo::cuda_ipc

// The CUDA runtime as the GPU model uses it (cuda_support.cpp), behind a header free of CUDA's:
// device queries, device memory, copies and streams. Every call throws std::runtime_error naming
// the CUDA call and its error on failure. Streams are cudaStream_t as void*.
#pragma once
#include <cstddef>
#include <string>
#include <utility>

namespace kolo::gpt::cuda {

// "" when a CUDA device is usable, else why not (cudaGetDeviceCount's error, or "no CUDA device").
std::string unavailable_reason();
int device_count();
void set_device(int device);
std::string device_name(int device);  // "NVIDIA H200 (bus 0000:1b:00.0)"

void* device_alloc(size_t bytes);
void device_free(void* p) noexcept;
// Host <-> device copies queued on `stream`. download() synchronizes the stream (the host reads
// the result); upload() from pageable memory returns once the data is staged.
void upload(void* device_dst, const void* host_src, size_t bytes, void* stream);
void download(void* host_dst, const void* device_src, size_t bytes, void* stream);
void zero(void* device_dst, size_t bytes, void* stream);

void* create_stream();  // non-blocking: never synchronizes with the legacy default stream
void destroy_stream(void* stream) noexcept;
void synchronize(void* stream);
// Throws if a kernel launch failed (an invalid configuration; a kernel's own faults surface at
// the next synchronizing call).
void check_launch(const char* what);

// Device memory of `count` Ts, freed with the object.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t count) : ptr_(static_cast<T*>(device_alloc(count * sizeof(T)))), count_(count) {}
  ~DeviceArray() { device_free(ptr_); }
  DeviceArray(DeviceArray&& o) noexcept : ptr_(o.ptr_), count_(o.count_) { o.ptr_ = nullptr, o.count_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  // Reallocates (contents lost) when `count` differs from the current size.
  void resize(size_t count) {
    if (count != count_) *this = DeviceArray(count);
  }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

}  // namespace kolo::gpt::cuda

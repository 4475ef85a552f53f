#include "cuda_support.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>

namespace kolo::gpt::cuda {
namespace {

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: ") + call + " failed: " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so later calls do not report it
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }
  return n > 0 ? std::string() : std::string("no CUDA device is visible");
}

int device_count() {
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  return n;
}

void set_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

std::string device_name(int device) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  return std::string(prop.name) + " (bus " + bus + ")";
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  return p;
}

void device_free(void* p) noexcept {
  if (p) cudaFree(p);
}

void upload(void* device_dst, const void* host_src, size_t bytes, void* stream) {
  if (bytes) check(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, as_stream(stream)), "cudaMemcpyAsync to the device");
}

void download(void* host_dst, const void* device_src, size_t bytes, void* stream) {
  if (bytes) check(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)), "cudaMemcpyAsync to the host");
  synchronize(stream);
}

void zero(void* device_dst, size_t bytes, void* stream) {
  if (bytes) check(cudaMemsetAsync(device_dst, 0, bytes, as_stream(stream)), "cudaMemsetAsync");
}

void* create_stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void destroy_stream(void* stream) noexcept {
  if (stream) cudaStreamDestroy(as_stream(stream));
}

void synchronize(void* stream) { check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize"); }

void check_launch(const char* what) { check(cudaGetLastError(), what); }

}  // namespace kolo::gpt::cuda

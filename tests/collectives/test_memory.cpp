#include "test_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "kernels/device_runtime.hpp"
#ifdef KOLO_TEST_CUDA
#include <cuda_runtime.h>
#endif

namespace kolo::coltest {

bool test_on_device() {
  static const bool on = [] {
    const char* v = std::getenv("KOLO_TEST_DEVICE_MEMORY");
    return v && std::string(v) == "1";
  }();
  return on;
}

Device test_device() {
  static const Device device = []() -> Device {
    if (!test_on_device()) return Device::cpu();
    kernels::DeviceRuntime* rt = kernels::device_runtime();
    if (!rt || rt->device_count() == 0)
      throw std::runtime_error("KOLO_TEST_DEVICE_MEMORY=1 but no device runtime is usable" +
                               std::string(rt ? ": " + rt->unavailable_reason() : ""));
    const char* local = std::getenv("LOCAL_RANK");
    const int index = (local ? std::atoi(local) : 0) % rt->device_count();
    rt->set_device(index);
    return Device::cuda(index);
  }();
  return device;
}

void* test_alloc(size_t bytes) {
  if (!test_on_device()) {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  test_device();  // picks the device first
  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (std::string(rt->name()) != "cuda") return rt->alloc_device(bytes);
#ifdef KOLO_TEST_CUDA
  void* p = nullptr;
  if (cudaMallocManaged(&p, bytes ? bytes : 1) != cudaSuccess) throw std::bad_alloc();
  return p;
#else
  throw std::runtime_error("device memory on CUDA needs the tests built with CUDA");
#endif
}

void test_free(void* p) {
  if (!test_on_device()) return std::free(p);
  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (std::string(rt->name()) != "cuda") return rt->free_device(p);
#ifdef KOLO_TEST_CUDA
  cudaFree(p);
#endif
}

}  // namespace kolo::coltest

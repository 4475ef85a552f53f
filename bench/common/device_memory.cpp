// CUDA runtime side of device_memory.hpp, compiled only when the build finds CUDA
// (bench/common/meson.build); device_memory_none.cpp stands in for it otherwise.
#include "device_memory.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>

namespace kolo::bench {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

class CudaMemory final : public DeviceMemory {
 public:
  CudaMemory(DeviceInfo info, cudaStream_t stream) : info_(std::move(info)), stream_(stream) {}
  ~CudaMemory() override { cudaStreamDestroy(stream_); }
  const DeviceInfo& info() const override { return info_; }
  void* stream() const override { return stream_; }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    check(cudaMemset(p, 0, bytes), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  // cudaMemcpy runs on the legacy default stream, which the measured stream (a blocking one)
  // is ordered after; the device synchronize also waits for the engine's own streams, so no
  // copy of an earlier run can land after these.
  void to_device(void* device, const void* host, size_t bytes) override {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  void to_host(void* host, const void* device, size_t bytes) override {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }
  void synchronize_stream() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  DeviceInfo info_;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<DeviceMemory> open_cuda_device(int local_rank, int gpus_per_process) {
  int visible = 0;
  const cudaError_t e = cudaGetDeviceCount(&visible);
  if (e != cudaSuccess || visible == 0) {
    throw DeviceUnavailable(std::string("-g ") + std::to_string(gpus_per_process) +
                            ": no usable CUDA device (" + (e != cudaSuccess ? cudaGetErrorString(e) : "none visible") +
                            "); run without -g to measure host memory");
  }
  if (gpus_per_process > visible) {
    throw DeviceUnavailable("-g " + std::to_string(gpus_per_process) + ": only " + std::to_string(visible) +
                            " CUDA device(s) visible");
  }
  DeviceInfo info;
  info.index = (local_rank * gpus_per_process) % visible;
  check(cudaSetDevice(info.index), "cudaSetDevice");
  // Yield while synchronizing instead of spinning: kolorun binds each rank to one core, which
  // this thread shares with kolo's engine thread, the one that moves a device operation's data
  // (spinning, it kept the engine waiting for the scheduler: 0.8 ms per call on an H200).
  // Before anything makes the device's context, which fixes the flags.
  const cudaError_t flags = cudaSetDeviceFlags(cudaDeviceScheduleYield);
  if (flags != cudaSuccess) (void)cudaGetLastError();  // a context made already: keep its flags
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, info.index), "cudaGetDeviceProperties");
  info.name = prop.name;
  char bus[32] = {};
  check(cudaDeviceGetPCIBusId(bus, sizeof bus, info.index), "cudaDeviceGetPCIBusId");
  info.bus_id = bus;
  char pci[32];
  std::snprintf(pci, sizeof pci, "%04x:%02x:%02x", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  info.pci = pci;
  // A blocking stream (not cudaStreamNonBlocking): ordered after the legacy default stream's
  // copies of the check's inputs, as nccl-tests' streams are.
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  return std::make_unique<CudaMemory>(std::move(info), stream);
}

}  // namespace kolo::bench

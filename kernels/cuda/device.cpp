// Questions to the CUDA runtime that the kernels share: is there a device at all (asked once,
// with "no driver" and "no GPU" answered as false rather than an abort), how many SMs the
// current device has (cached per device), and turning a cudaError_t into kolo::Error.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <string>
#include "kernels/cuda/cuda_api.hpp"
#include "kernels/cuda/launchers.hpp"
#include "kolo/error.hpp"

namespace kolo::kernels {

const CudaProbe& cuda_probe() {
  static const CudaProbe probe = [] {
    CudaProbe result;
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      // cudaErrorNoDevice, cudaErrorInsufficientDriver, ...: not a failure of the caller.
      // Reading the error clears it, so it does not resurface from a later cudaGetLastError.
      result.error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
      (void)cudaGetLastError();
      count = 0;
    } else if (count == 0) {
      result.error = "cudaGetDeviceCount: 0 devices";
    }
    result.device_count = count;
    return result;
  }();
  return probe;
}

bool cuda_available() { return cuda_probe().device_count > 0; }

namespace cuda::detail {

void check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  throw Error(what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

int sm_count() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  // 0 = not asked yet. A race between two first callers asks twice and stores the same value.
  constexpr int kCachedDevices = 64;
  static std::array<std::atomic<int>, kCachedDevices> cached{};
  if (device >= 0 && device < kCachedDevices) {
    const int known = cached[device].load(std::memory_order_relaxed);
    if (known > 0) return known;
  }
  int count = 0;
  check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute(MultiProcessorCount, device " + std::to_string(device) + ")");
  if (count <= 0) count = 1;
  if (device >= 0 && device < kCachedDevices) cached[device].store(count, std::memory_order_relaxed);
  return count;
}

}  // namespace cuda::detail
}  // namespace kolo::kernels

// device_memory.hpp in a build without CUDA: -g 1 is refused, never measured on the host.
#include "device_memory.hpp"

namespace kolo::bench {

std::unique_ptr<DeviceMemory> open_cuda_device(int, int gpus_per_process) {
  throw DeviceUnavailable("-g " + std::to_string(gpus_per_process) +
                          ": this kolo-perf was built without CUDA (meson setup -Dcuda=enabled); run without -g "
                          "to measure host memory");
}

}  // namespace kolo::bench

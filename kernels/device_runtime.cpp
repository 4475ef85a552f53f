// Which device runtime this process uses (kernels/device_runtime.hpp).
#include "kernels/device_runtime.hpp"

#include "common/config.hpp"

namespace kolo::kernels {
namespace {
DeviceRuntimeMaker& cuda_maker() {
  static DeviceRuntimeMaker maker = nullptr;
  return maker;
}
}  // namespace

namespace {
thread_local bool forbidden = false;
}
void forbid_device_calls_on_this_thread() { forbidden = true; }
bool device_calls_forbidden_here() { return forbidden; }

RegisterCudaRuntime::RegisterCudaRuntime(DeviceRuntimeMaker make) { cuda_maker() = make; }

DeviceRuntime* device_runtime() {
  static DeviceRuntime* const runtime = []() -> DeviceRuntime* {
    if (config::get_int("KOLO_DEVICE_STANDIN") > 0) return make_standin_runtime();
    return cuda_maker() ? cuda_maker()() : nullptr;
  }();
  return runtime;
}

}  // namespace kolo::kernels

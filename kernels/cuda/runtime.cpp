// CUDA's device runtime for the engine's staging of device memory (kernels/device_runtime.hpp):
// thin calls into the CUDA runtime, plus the two driver calls a stream needs to wait on a host
// flag (cuStreamWaitValue32 / cuStreamWriteValue32), found through cudaGetDriverEntryPoint so
// that libkolo does not link libcuda (a machine without a driver still loads it).
#include <cuda.h>
#include <cuda_runtime.h>

#include <mutex>

#include "kernels/cuda/cuda_api.hpp"
#include "kernels/cuda/launchers.hpp"
#include "kernels/device_runtime.hpp"
#include "kolo/error.hpp"

namespace kolo::kernels {
namespace {

using cuda::detail::check;
using StreamValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

class CudaRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "cuda"; }
  int device_count() override { return cuda_probe().device_count; }
  std::string unavailable_reason() override { return cuda_probe().error; }

  int device_of(const void* p) override {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
      (void)cudaGetLastError();  // not known to CUDA: plain host memory
      return -1;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
  }
  void set_device(int device) override { check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")"); }
  int current_device() override {
    int d = 0;
    check(cudaGetDevice(&d), "cudaGetDevice");
    return d;
  }

  void* alloc_device(size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  void free_device(void* p) override { check(cudaFree(p), "cudaFree"); }
  void* alloc_host(size_t bytes) override {
    void* p = nullptr;
    // Portable: any device may copy from it; mapped: a stream can wait on flags in it.
    check(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable | cudaHostAllocMapped),
          "cudaHostAlloc(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  void free_host(void* p) override { check(cudaFreeHost(p), "cudaFreeHost"); }

  void* create_stream() override {
    cudaStream_t s = nullptr;
    // Non-blocking: the engine's copies must not wait for the legacy default stream, which may
    // itself be waiting for them (a user's wait() queued there).
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return s;
  }
  void destroy_stream(void* s) override { check(cudaStreamDestroy(as_stream(s)), "cudaStreamDestroy"); }
  void synchronize(void* s) override { check(cudaStreamSynchronize(as_stream(s)), "cudaStreamSynchronize"); }
  void* create_event() override {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }
  void destroy_event(void* e) override { check(cudaEventDestroy(as_event(e)), "cudaEventDestroy"); }
  void record(void* e, void* s) override { check(cudaEventRecord(as_event(e), as_stream(s)), "cudaEventRecord"); }
  bool done(void* e) override {
    const cudaError_t status = cudaEventQuery(as_event(e));
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    check(status, "cudaEventQuery");
    return true;
  }
  void stream_wait(void* s, void* e) override {
    check(cudaStreamWaitEvent(as_stream(s), as_event(e), 0), "cudaStreamWaitEvent");
  }
  void copy(void* dst, const void* src, size_t bytes, void* s) override {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(s)), "cudaMemcpyAsync");
  }
  void reduce(DataType t, const ReduceOp& op, void* dst, const void* src, size_t stride_bytes, int ways, size_t count,
              int nranks, void* s) override {
    if (count == 0) return;
    if (ways < 1) throw InvalidArgument("kolo: device reduce over " + std::to_string(ways) + " arrays");
    const char* in = static_cast<const char*>(src);
    // One pass per further array (kernels/cuda's two-input kernels, in rank order so every rank
    // that reduces the same arrays gets the same bits), then the op's last step once.
    if (ways == 1)
      check(cudaMemcpyAsync(dst, in, count * dtype_size(t), cudaMemcpyDefault, as_stream(s)), "cudaMemcpyAsync");
    else
      cuda::reduce(t, op.kind, dst, in, in + stride_bytes, count, s);
    for (int j = 2; j < ways; ++j) cuda::reduce_inplace(t, op.kind, dst, in + static_cast<size_t>(j) * stride_bytes, count, s);
    cuda::finalize(t, op, dst, count, nranks, s);
  }
  void host_fn(void* s, std::function<void()> fn) override {
    auto* heap = new std::function<void()>(std::move(fn));
    const cudaError_t status = cudaLaunchHostFunc(
        as_stream(s),
        [](void* arg) {
          auto* f = static_cast<std::function<void()>*>(arg);
          (*f)();
          delete f;
        },
        heap);
    if (status != cudaSuccess) delete heap;
    check(status, "cudaLaunchHostFunc");
  }

  bool can_wait_on_flags() override {
    std::call_once(flags_once_, [this] {
      cudaDriverEntryPointQueryResult found{};
      void* wait = nullptr;
      void* write = nullptr;
      if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wait, 12000, cudaEnableDefault, &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess ||
          cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &write, 12000, cudaEnableDefault, &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return;
      }
      wait_value_ = reinterpret_cast<StreamValueFn>(wait);
      write_value_ = reinterpret_cast<StreamValueFn>(write);
      // Found is not proof that this GPU and driver wait on host memory: try it once, and use
      // events (a host wait) instead if anything about it fails.
      if (!flags_work()) wait_value_ = write_value_ = nullptr;
    });
    return wait_value_ != nullptr && write_value_ != nullptr;
  }
  void write_flag(void* s, uint32_t* flag, uint32_t value) override {
    check_driver(write_value_(static_cast<CUstream>(s), device_pointer(flag), value, CU_STREAM_WRITE_VALUE_DEFAULT),
                 "cuStreamWriteValue32");
  }
  void wait_flag(void* s, uint32_t* flag, uint32_t value) override {
    check_driver(wait_value_(static_cast<CUstream>(s), device_pointer(flag), value, CU_STREAM_WAIT_VALUE_GEQ),
                 "cuStreamWaitValue32");
  }

 private:
  static CUdeviceptr device_pointer(uint32_t* host) {
    void* d = nullptr;
    check(cudaHostGetDevicePointer(&d, host, 0), "cudaHostGetDevicePointer");
    return reinterpret_cast<CUdeviceptr>(d);
  }
  bool flags_work() {
    uint32_t* flag = nullptr;
    void* stream = nullptr;
    bool ok = false;
    try {
      flag = static_cast<uint32_t*>(alloc_host(sizeof(uint32_t)));
      *flag = 0;
      stream = create_stream();
      write_flag(stream, flag, 7);
      wait_flag(stream, flag, 7);
      synchronize(stream);
      ok = *static_cast<volatile uint32_t*>(flag) == 7;
    } catch (const std::exception&) {
      (void)cudaGetLastError();
    }
    if (stream) (void)cudaStreamDestroy(as_stream(stream));
    if (flag) (void)cudaFreeHost(flag);
    return ok;
  }
  static void check_driver(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS) throw Error(std::string(what) + " failed: CUresult " + std::to_string(static_cast<int>(r)));
  }
  std::once_flag flags_once_;
  StreamValueFn wait_value_ = nullptr;
  StreamValueFn write_value_ = nullptr;
};

const RegisterCudaRuntime kRegister([]() -> DeviceRuntime* { return new CudaRuntime(); });

}  // namespace
}  // namespace kolo::kernels

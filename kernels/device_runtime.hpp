// What the engine needs of a GPU to stage device memory through the host transports: pinned
// host memory, streams, events, asynchronous copies, and flags a stream can wait on. Two
// implementations: CUDA's (kernels/cuda/runtime.cpp, in builds with CUDA), and a host stand-in
// (kernels/standin/standin_runtime.cpp) in which "device memory" is host memory and every
// stream is a thread running its queue in order, so that the whole staging path, its ordering
// and its failures are tested on machines without a GPU (KOLO_DEVICE_STANDIN=1).
//
// Handles (streams, events) are opaque pointers: a cudaStream_t / cudaEvent_t cast to void*
// for CUDA; nullptr as a stream is the legacy default stream. Every call throws kolo::Error
// on failure; none blocks except synchronize().
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kolo/types.hpp"

namespace kolo::kernels {

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual const char* name() const = 0;  // "cuda" or "host stand-in"
  virtual int device_count() = 0;
  // Why no device is usable (cudaGetDeviceCount's error), for the refusal of device buffers.
  virtual std::string unavailable_reason() = 0;
  // The device `p` points into, -1 when it is not device memory (host or unknown memory).
  virtual int device_of(const void* p) = 0;
  virtual void set_device(int device) = 0;  // the calling thread's current device
  virtual int current_device() = 0;

  // Device memory (tests and benchmarks fill and read it through copy()).
  virtual void* alloc_device(size_t bytes) = 0;
  virtual void free_device(void* p) = 0;
  // Pinned host memory the GPU can copy from and to at full speed, and read and write (flags).
  virtual void* alloc_host(size_t bytes) = 0;
  virtual void free_host(void* p) = 0;

  virtual void* create_stream() = 0;  // on the current device; does not synchronize with stream 0
  virtual void destroy_stream(void* stream) = 0;
  virtual void synchronize(void* stream) = 0;  // blocks the host
  virtual void* create_event() = 0;            // on the current device; no timing
  virtual void destroy_event(void* event) = 0;
  virtual void record(void* event, void* stream) = 0;
  virtual bool done(void* event) = 0;  // the work before its last record() has run
  virtual void stream_wait(void* stream, void* event) = 0;
  // Asynchronous copy in any direction (host, pinned host or device memory).
  virtual void copy(void* dst, const void* src, size_t bytes, void* stream) = 0;
  // Runs `fn` on a host thread once the work queued before it on `stream` has run; the work
  // queued after it waits for it to return (cudaLaunchHostFunc). `fn` must not call the runtime.
  virtual void host_fn(void* stream, std::function<void()> fn) = 0;
  // The GPU's side of a staged reduction (docs/ARCHITECTURE.md, "Device memory"): dst[i] = the
  // reduction by `op` of src[i], src[stride + i], ..., over `ways` arrays in that order, then
  // op's last step over `nranks` (avg's division, premul_sum's factor), asynchronously on
  // `stream`. dst and the arrays are device memory or pinned host memory (alloc_host: mapped, so
  // kernels read and write it in place); dst overlaps none of the arrays. Argument errors are
  // thrown before anything is queued.
  virtual void reduce(DataType t, const ReduceOp& op, void* dst, const void* src, size_t stride_bytes, int ways,
                      size_t count, int nranks, void* stream) = 0;

  // Flags in pinned host memory (alloc_host) that a stream writes and waits on without the
  // host (cuStreamWriteValue32 / cuStreamWaitValue32). wait_flag's stream waits until
  // (int32_t)(*flag - value) >= 0, so values may wrap around.
  virtual bool can_wait_on_flags() = 0;
  virtual void write_flag(void* stream, uint32_t* flag, uint32_t value) = 0;
  virtual void wait_flag(void* stream, uint32_t* flag, uint32_t value) = 0;
};

// kolo's engine threads make no device-runtime call (docs/ARCHITECTURE.md, "Device memory": a
// caller blocked in a synchronous CUDA call may hold the runtime's locks). An engine thread marks
// itself at start; the stand-in refuses any call from a marked thread, so the tests catch a
// regression on machines without a GPU.
void forbid_device_calls_on_this_thread();
bool device_calls_forbidden_here();

// The device runtime of this process: the host stand-in when KOLO_DEVICE_STANDIN=1, else
// CUDA's when this build has CUDA, else null. Made once, never destroyed (engine threads may
// still use it while the process exits).
DeviceRuntime* device_runtime();

// kernels/cuda/runtime.cpp registers CUDA's maker (a build without CUDA has none).
using DeviceRuntimeMaker = DeviceRuntime* (*)();
struct RegisterCudaRuntime {
  explicit RegisterCudaRuntime(DeviceRuntimeMaker make);
};
// The stand-in (kernels/standin/standin_runtime.cpp).
DeviceRuntime* make_standin_runtime();

}  // namespace kolo::kernels

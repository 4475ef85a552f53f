// kolo-perf -g 1 (nccl-tests' "GPUs per process"): the measured buffers in CUDA device memory.
// The harness (harness.hpp) keeps filling and checking host buffers, as for host memory, and
// moves them to and from the device through this interface, so the values and the checker are
// the same for both kinds of memory. The interface is plain C++; its one implementation
// (device_memory.cpp, CUDA runtime) is compiled only when the build finds CUDA
// (KOLO_BENCH_CUDA), so that bench/common and the peers owe nothing to CUDA.
#pragma once
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

namespace kolo::bench {

// What the "Using devices" lines and the JSON files name.
struct DeviceInfo {
  int index = -1;      // CUDA device index (cudaSetDevice's), -1: host memory
  std::string name;    // "NVIDIA H200"
  std::string bus_id;  // cudaDeviceGetPCIBusId's "0000:1B:00.0"
  std::string pci;     // nccl-tests' "[%04x:%02x:%02x]" text, without brackets: "0000:1b:00"
};

// No usable device: a build without CUDA, no GPU, or fewer GPUs than -g asks for. kolo-perf
// reports it and exits non-zero instead of measuring host memory under a GPU command line.
class DeviceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual const DeviceInfo& info() const = 0;
  // The stream every measured operation is issued on (Options.stream), a cudaStream_t.
  virtual void* stream() const = 0;
  virtual void* allocate(size_t bytes) = 0;  // zeroed, so a first timed run reads defined values
  virtual void release(void* p) = 0;
  // Synchronous copies (checks and fills only, never timed); they return with the copy done.
  virtual void to_device(void* device, const void* host, size_t bytes) = 0;
  virtual void to_host(void* host, const void* device, size_t bytes) = 0;
  // Blocks until everything queued on stream() has run (nccl-tests' cudaStreamSynchronize
  // before it reads the clock).
  virtual void synchronize_stream() = 0;
};

// Selects CUDA device (local_rank * gpus_per_process) % visible devices, as nccl-tests spreads
// the GPUs of one host over its local processes (so several ranks may share one GPU), and
// creates the stream. Throws DeviceUnavailable when no GPU can serve (or, built without CUDA,
// always).
std::unique_ptr<DeviceMemory> open_cuda_device(int local_rank, int gpus_per_process);

}  // namespace kolo::bench

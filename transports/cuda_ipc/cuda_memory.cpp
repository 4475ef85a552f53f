// CudaMemory: IpcMemory through the CUDA runtime (see cuda_memory.hpp).
#include "transports/cuda_ipc/cuda_memory.hpp"

#include <cuda.h>  // types of the driver call only: it is reached through cudart, not linked
#include <cuda_runtime.h>

#include <unistd.h>

#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <vector>
#include "kolo/error.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace kolo::cuda_ipc {
namespace {

// cuPointerGetAttributes through cudart's entry-point query, so that nothing here links
// libcuda (whose stub is all a build machine without a GPU has).
using PointerGetAttributes = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);

PointerGetAttributes pointer_get_attributes() {
  static PointerGetAttributes fn = [] {
    // The symbol's ABI has not changed since CUDA 7; ask as of this runtime, then as of 12.0.
    for (unsigned version : {unsigned{CUDART_VERSION}, 12000u}) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult found{};
      const cudaError_t rc = cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &p, version, cudaEnableDefault, &found);
      if (rc == cudaSuccess && found == cudaDriverEntryPointSuccess && p != nullptr) {
        return reinterpret_cast<PointerGetAttributes>(p);
      }
      (void)cudaGetLastError();
    }
    throw Error("cuda_ipc: cudaGetDriverEntryPointByVersion found no cuPointerGetAttributes in the driver");
  }();
  return fn;
}

// Copies on a stream of their own, each followed by an event from a ring that grows while
// every event in it is still pending; done() queries them in order.
class CudaCopyQueue final : public CopyQueue {
 public:
  CudaCopyQueue() { check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  ~CudaCopyQueue() override {
    // Whatever is still queued reads or writes memory that may be freed next.
    (void)cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    (void)cudaStreamDestroy(stream_);
  }
  uint64_t copy(void* dst, const void* src, size_t bytes) override {
    if (posted_ - done_ == events_.size()) grow();
    if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync (pair copy)");
    ++posted_;
    check(cudaEventRecord(events_[posted_ % events_.size()], stream_), "cudaEventRecord (pair copy)");
    return posted_;
  }
  void drain() override {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (pair copies, on failure)");
    done_ = posted_;
  }
  uint64_t done() override {
    while (done_ < posted_) {
      const cudaError_t rc = cudaEventQuery(events_[(done_ + 1) % events_.size()]);
      if (rc == cudaErrorNotReady) break;
      check(rc, "cudaEventQuery (pair copy)");
      ++done_;
    }
    return done_;
  }

 private:
  void grow() {
    // Only while every event is pending, so the pending ones keep their indices if the ring is
    // rebuilt in order: wait for them instead (rare: more copies in flight than events).
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (growing the pair's event ring)");
    done_ = posted_;
    const size_t n = events_.empty() ? 16 : events_.size() * 2;
    while (events_.size() < n) {
      cudaEvent_t e;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      events_.push_back(e);
    }
  }
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  uint64_t posted_ = 0, done_ = 0;
};

class CudaMemory final : public IpcMemory {
 public:
  const char* name() const override { return "cuda"; }
  AllocationRange allocation_of(const void* ptr) override {
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE,     CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,     CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
    unsigned memory_type = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    unsigned long long id = 0;
    unsigned managed = 0;  // bool-valued attributes are written as an int-sized value
    unsigned ipc_capable = 0;
    void* data[] = {&memory_type, &start, &size, &id, &managed, &ipc_capable};
    const CUresult rc = pointer_get_attributes()(6, attrs, data, reinterpret_cast<CUdeviceptr>(ptr));
    // Managed memory reads as host or device memory depending on where its pages are; it is
    // the caller's GPU memory either way (the bounce path moves it).
    if (rc != CUDA_SUCCESS || (memory_type != CU_MEMORYTYPE_DEVICE && !managed) || start == 0) {
      throw InvalidArgument("cuda_ipc: buffer " + std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                            " is not device memory allocated by this process (CUresult " + std::to_string(rc) + ")");
    }
    return AllocationRange{static_cast<uintptr_t>(start), size, id, ipc_capable != 0 && managed == 0};
  }
  // A handle is this process's token, the base here, then the cudaIpcMemHandle_t. CUDA opens no
  // handle in the process that exported it, and ranks that are threads of one process (the
  // transport conformance suite's) need none: there the base is used as it is.
  std::string export_handle(uintptr_t base) override {
    Exported e{token_, base, {}};
    check(cudaIpcGetMemHandle(&e.handle, reinterpret_cast<void*>(base)), "cudaIpcGetMemHandle");
    return std::string(reinterpret_cast<const char*>(&e), sizeof e);
  }
  char* open_handle(const std::string& handle) override {
    if (handle.size() != sizeof(Exported)) throw Error("cuda_ipc: malformed IPC memory handle");
    Exported e;
    std::memcpy(&e, handle.data(), sizeof e);
    if (e.token == token_) {
      std::lock_guard<std::mutex> lk(mu_);
      local_.insert(reinterpret_cast<char*>(e.base));
      return reinterpret_cast<char*>(e.base);
    }
    void* base = nullptr;
    check(cudaIpcOpenMemHandle(&base, e.handle, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
    return static_cast<char*>(base);
  }
  void close_handle(char* base) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (auto it = local_.find(base); it != local_.end()) {
        local_.erase(it);
        return;
      }
    }
    check(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle");
  }
  std::unique_ptr<CopyQueue> copy_queue() override { return std::make_unique<CudaCopyQueue>(); }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
    return p;
  }
  void release(void* ptr) override { check(cudaFree(ptr), "cudaFree"); }
  void to_device(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (host to device)");
    // From pageable memory cudaMemcpy may return before its DMA has landed, and the pairs' copy
    // streams are non-blocking (not ordered after the legacy stream): wait for it here.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after a host to device copy)");
  }
  void to_host(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
  }

 private:
  struct Exported {
    uint64_t token;
    uint64_t base;
    cudaIpcMemHandle_t handle;
  };
  const uint64_t token_ = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32 | rd()) ^ static_cast<uint64_t>(::getpid());
  }();
  // Bases "opened" from this process's own handles, keyed by address. Several ranks of one
  // process open the same handle once each (PeerMappings counts per rank's mappings), so this
  // is a multiset.
  std::mutex mu_;
  std::multiset<char*> local_;
};

}  // namespace

IpcMemory& cuda_memory() {
  static CudaMemory m;
  return m;
}

bool cuda_device_usable(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = std::string("no CUDA device: ") + cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc);
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device: cudaGetDeviceCount found none";
    return false;
  }
  return true;
}

}  // namespace kolo::cuda_ipc

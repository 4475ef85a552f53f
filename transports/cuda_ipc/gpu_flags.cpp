// GpuFlags (see gpu_flags.hpp).
#include "transports/cuda_ipc/gpu_flags.hpp"

#include <cuda.h>  // types of the driver calls only: they are reached through cudart, not linked

#include <string>
#include "kolo/error.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace kolo::cuda_ipc {
namespace {

using StreamValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);

struct Entry {
  StreamValue64 wait = nullptr, write = nullptr;
};

const Entry& entry() {
  static const Entry e = [] {
    Entry x;
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &p, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      x.wait = reinterpret_cast<StreamValue64>(p);
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &p, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      x.write = reinterpret_cast<StreamValue64>(p);
    (void)cudaGetLastError();
    return x;
  }();
  return e;
}

void check_driver(CUresult rc, const char* what) {
  if (rc != CUDA_SUCCESS) throw Error(std::string("cuda_ipc: ") + what + " failed (CUresult " + std::to_string(rc) + ")");
}

}  // namespace

GpuFlags::GpuFlags(HostFlags& flags, int rank) : flags_(flags), host_base_(static_cast<char*>(flags.segment())) {
  if (entry().wait == nullptr || entry().write == nullptr)
    throw Error("cuda_ipc: this driver has no cuStreamWaitValue64 / cuStreamWriteValue64 (flag ordering)");
  check(cudaHostRegister(host_base_, flags.segment_bytes(), cudaHostRegisterMapped | cudaHostRegisterPortable),
        "cudaHostRegister (the shared flag segment)");
  try {
    void* d = nullptr;
    check(cudaHostGetDevicePointer(&d, host_base_, 0), "cudaHostGetDevicePointer");
    device_base_ = reinterpret_cast<uintptr_t>(d);
    // Probe, run to completion: write 0 into this rank's kReady word (0 already: no call was
    // made) and wait for it to be >= 0. A GPU or driver without 64-bit stream memory operations
    // answers with an error here, not with a hang later.
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    const uint64_t word = device_word(rank, kReady);
    CUresult rc = entry().write(reinterpret_cast<CUstream>(s), word, 0, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (rc == CUDA_SUCCESS) rc = entry().wait(reinterpret_cast<CUstream>(s), word, 0, CU_STREAM_WAIT_VALUE_GEQ);
    const cudaError_t sync = cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);
    check_driver(rc, "64-bit stream memory operations on the flag segment");
    check(sync, "cudaStreamSynchronize (flag probe)");
  } catch (...) {
    (void)cudaHostUnregister(host_base_);
    throw;
  }
}

GpuFlags::~GpuFlags() { (void)cudaHostUnregister(host_base_); }

uint64_t GpuFlags::device_word(int rank, Phase phase) {
  return device_base_ + static_cast<uintptr_t>(reinterpret_cast<char*>(flags_.gpu_word(rank, phase)) - host_base_);
}

void GpuFlags::write(int rank, Phase phase, uint64_t seq, cudaStream_t stream) {
  check_driver(entry().write(reinterpret_cast<CUstream>(stream), device_word(rank, phase), seq, CU_STREAM_WRITE_VALUE_DEFAULT),
               "cuStreamWriteValue64");
}

void GpuFlags::wait(int peer, Phase phase, uint64_t seq, cudaStream_t stream) {
  check_driver(entry().wait(reinterpret_cast<CUstream>(stream), device_word(peer, phase), seq, CU_STREAM_WAIT_VALUE_GEQ),
               "cuStreamWaitValue64");
}

}  // namespace kolo::cuda_ipc

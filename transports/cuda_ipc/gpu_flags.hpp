// Cross-process ordering on the GPU through words in the shared host segment (host_flags.hpp):
// a rank's stream writes the call number into its word of a phase when it gets there
// (cuStreamWriteValue64), and a peer's stream waits until that word is at least the call
// number (cuStreamWaitValue64, GEQ). The alternative to interprocess events (ipc_events.hpp),
// chosen by KOLO_CUDA_IPC_ORDERING=flags: a value wait is satisfied by any later call too, so
// it needs no "latest record" argument, and it may cost less when the ranks share one GPU
// (each cross-process event wait cost ~280 us there: docs/PERFORMANCE.md). The host handshake
// stays: it says the peer issued the call, so its descriptor is valid.
//
// The segment is registered with CUDA (mapped, portable) in every process; 64-bit stream memory
// operations are probed once, and the constructor throws when this GPU or driver lacks them.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include "transports/cuda_ipc/host_flags.hpp"

namespace kolo::cuda_ipc {

class GpuFlags {
 public:
  GpuFlags(HostFlags& flags, int rank);
  ~GpuFlags();
  GpuFlags(const GpuFlags&) = delete;
  GpuFlags& operator=(const GpuFlags&) = delete;

  // This rank's stream reached `phase` of call `seq`.
  void write(int rank, Phase phase, uint64_t seq, cudaStream_t stream);
  // `stream` waits until `peer`'s stream reached `phase` of call `seq` (or a later call).
  void wait(int peer, Phase phase, uint64_t seq, cudaStream_t stream);

 private:
  uint64_t device_word(int rank, Phase phase);

  HostFlags& flags_;
  char* host_base_;
  uintptr_t device_base_ = 0;
};

}  // namespace kolo::cuda_ipc

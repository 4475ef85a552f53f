// Cross-process ordering on the GPU: per rank one interprocess event per phase of a call
// (kReady: my input is ready; kMid: my slice of the two-shot result is ready; kDone: I have
// finished reading your buffers; kRingStep0 + g: my ring step g is done). Each rank records only its own events; peers open them by
// handle (exchanged once through the store) and make their stream wait on them. Interprocess
// events must be created with timing disabled.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include "kolo/store.hpp"
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/host_flags.hpp"

namespace kolo::cuda_ipc {

class IpcEvents {
 public:
  // Collective (through the store): creates this rank's events and opens every peer's.
  IpcEvents(Store& store, const std::string& prefix, int rank, int world, std::chrono::milliseconds timeout);
  ~IpcEvents();  // only after every peer's stream is past its waits on these (IpcComm::close)
  IpcEvents(const IpcEvents&) = delete;
  IpcEvents& operator=(const IpcEvents&) = delete;

  void record(Phase phase, cudaStream_t stream);
  void wait(int peer, Phase phase, cudaStream_t stream);

 private:
  void destroy();

  int rank_, world_;
  // [rank_]: ours; the others: opened (a ring step's only for the left neighbour, the one
  // this rank waits for; the rest stay null).
  cudaEvent_t events_[kMaxRanks][kNumEventPhases] = {};
};

}  // namespace kolo::cuda_ipc

// IpcComm: the device-side communicator of the ranks of one node (or of one GPU): peers'
// buffers mapped through CUDA IPC (registration_cache.hpp), calls ordered across processes by
// a host handshake plus IPC events (host_flags.hpp, ipc_events.hpp), and the GPU-resident
// all-reduce kernels (allreduce_kernels.hpp). The device counterpart of algo::Comm, small on
// purpose: the foundation of issue 44, not yet a registered transport (device memory is not a
// byte stream, so it does not fit PairBase).
//
// Every call is collective: all ranks call it in the same order with the same count, dtype and
// algorithm (checked: a mismatch throws). Buffers are device memory from cudaMalloc (any
// pointer into such an allocation); each rank may pass a different allocation every call, at
// the cost of one export on first use (see the registration cache). Calls are asynchronous on
// `stream`, like NCCL's: when they return, the work is enqueued; once the stream reaches the
// end of the call, every peer has finished reading this rank's buffers, so they may be reused.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include "kolo/store.hpp"
#include "kolo/types.hpp"
#include "transports/cuda_ipc/host_flags.hpp"
#include "transports/cuda_ipc/ipc_events.hpp"
#include "transports/cuda_ipc/registration_cache.hpp"

namespace kolo::cuda_ipc {

enum class Algo : uint32_t {
  kOneShot = 1,  // every rank reads every rank's whole input: one kernel, for small messages
  kTwoShot = 2,  // reduce-scatter (rank r sums slice r from all inputs) then all-gather (copy
                 // the other slices from the peers' outputs): less traffic, for large messages
  kTwoShotPush = 3,  // both shots in one kernel: rank r sums slice r from all inputs and writes
                     // it into every rank's output. The least HBM traffic (2 N S: each input
                     // read once, each output written once) and no phase between: made for
                     // ranks that share one GPU's memory.
};
const char* algo_name(Algo a);

class IpcComm {
 public:
  struct Options {
    std::string prefix = "cuda_ipc";  // store keys; distinct per communicator of one job
    std::chrono::milliseconds timeout{120000};  // each host wait and store wait
    // Diagnostic: order calls on the host alone (each phase published once this rank's stream
    // has finished the work before it; no IPC event waits). Slow, but it tells a fault of the
    // event ordering apart from one of the shared memory or the kernels.
    bool host_ordered = false;
  };
  // Collective. The current CUDA device must be the one the buffers live on.
  IpcComm(std::shared_ptr<Store> store, int rank, int world, Options opts);
  IpcComm(std::shared_ptr<Store> store, int rank, int world) : IpcComm(std::move(store), rank, world, Options{}) {}
  ~IpcComm();  // if close() was not called: releases locally, without the final handshake

  // out[i] = sum over ranks of in[i]. One-shot needs in != out (peers read `in` while this rank
  // writes `out`); the two-shot algorithms may run in place (each rank touches only its slice
  // of the inputs while others may read them).
  void all_reduce(const void* in, void* out, size_t count, DataType dtype, Algo algo, cudaStream_t stream);

  // Evicts the registration holding ptr; call before freeing a buffer used in a collective.
  bool deregister(const void* ptr) { return cache_.deregister(ptr); }
  const RegistrationCache& cache() const { return cache_; }
  const PeerMappings& mappings() const { return mappings_; }

  // Collective: waits for this process's device work, then for every peer to do the same, so
  // no stream still waits on an event about to be destroyed; then frees everything.
  void close();

  int rank() const { return rank_; }
  int world() const { return world_; }

 private:
  // Closes the mappings of peer p's registrations that p has retired since the last call.
  void close_retired_mappings(int p, cudaStream_t stream);
  // Waits (host) for every peer's `phase` of the current call, then makes `stream` wait (GPU)
  // on each peer's event for it.
  void handshake(Phase phase, cudaStream_t stream);
  // This rank reached `phase` on `stream`: records its event, then publishes the phase.
  void signal(Phase phase, cudaStream_t stream);

  std::shared_ptr<Store> store_;
  int rank_, world_;
  Options opts_;
  HostFlags flags_;
  std::unique_ptr<IpcEvents> events_;  // none in the host-ordered mode
  RegistrationCache cache_;
  PeerMappings mappings_;
  uint64_t seq_ = 0;
  uint64_t retired_seen_[kMaxRanks] = {};
  bool closed_ = false;
};

}  // namespace kolo::cuda_ipc

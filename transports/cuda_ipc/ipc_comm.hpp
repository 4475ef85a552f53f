// IpcComm: the device-side communicator of the ranks of one node (or of one GPU): peers'
// buffers mapped through CUDA IPC (registration_cache.hpp), calls ordered across processes by
// a host handshake plus IPC events (host_flags.hpp, ipc_events.hpp), and the GPU-resident
// all-reduce kernels (allreduce_kernels.hpp). The device counterpart of algo::Comm, small on
// purpose: whole collectives on a stream. Point-to-point messages of device memory, with the
// pair contract of transports/transport.hpp, are the pair device's (ipc_pair_device.hpp), which
// shares the registration cache and the memory interface (ipc_memory.hpp) with it.
//
// Every call is collective: all ranks call it in the same order with the same count, dtype and
// algorithm (checked: a mismatch throws). Buffers are device memory, any pointer into an
// allocation; each rank may pass a different allocation every call, at the cost of one export
// on first use (see the registration cache). Memory cudaIpcGetMemHandle cannot export (managed,
// pool or cuMemCreate memory) is copied through a buffer of the communicator's own
// (bounce_buffer.hpp): correct, one device copy slower. Calls are asynchronous on
// `stream`, like NCCL's: when they return, the work is enqueued; once the stream reaches the
// end of the call, every peer has finished reading this rank's buffers, so they may be reused.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include "kolo/store.hpp"
#include "kolo/types.hpp"
#include "transports/cuda_ipc/bounce_buffer.hpp"
#include "transports/cuda_ipc/gpu_flags.hpp"
#include "transports/cuda_ipc/host_flags.hpp"
#include "transports/cuda_ipc/ipc_algo.hpp"
#include "transports/cuda_ipc/ipc_cost_model.hpp"
#include "transports/cuda_ipc/ipc_events.hpp"
#include "transports/cuda_ipc/registration_cache.hpp"

namespace kolo::cuda_ipc {

// Algo (the all-reduce algorithms) and Ordering: ipc_algo.hpp.

class IpcComm {
 public:
  struct Options {
    std::string prefix = "cuda_ipc";  // store keys; distinct per communicator of one job
    std::chrono::milliseconds timeout{120000};  // each host wait and store wait
    // How a stream is made to wait for a peer's phase (the host handshake comes first in each):
    //   events  interprocess events (ipc_events.hpp), the default;
    //   flags   64-bit words in the shared segment written and waited on by the streams
    //           (gpu_flags.hpp);
    //   host    none: a phase is published only once this rank's stream has finished the work
    //           before it. Slow, but it tells a fault of the GPU-side ordering apart from one of
    //           the shared memory or the kernels.
    using Ordering = cuda_ipc::Ordering;
    Ordering ordering = Ordering::events;
    // Why a host wait should give up before its timeout (non-empty: give up), e.g. the engine's
    // group has failed; looked at while waiting (host_flags.hpp).
    std::function<std::string()> stop_check;
  };
  // Collective. The current CUDA device must be the one the buffers live on.
  IpcComm(std::shared_ptr<Store> store, int rank, int world, Options opts);
  IpcComm(std::shared_ptr<Store> store, int rank, int world) : IpcComm(std::move(store), rank, world, Options{}) {}
  ~IpcComm();  // if close() was not called: releases locally, without the final handshake

  // out[i] = sum over ranks of in[i]. Every algorithm runs in place too: the two-shot ones
  // touch only this rank's slice of the inputs while others may read them, and the ring only
  // chunks its right neighbour has finished reading (ipc_ring.cpp); one-shot, whose peers
  // read the whole input this rank overwrites, copies it to the bounce buffer first.
  // In or out of place may differ from rank to rank.
  void all_reduce(const void* in, void* out, size_t count, DataType dtype, Algo algo, cudaStream_t stream);

  // The other collectives, with NCCL's counts (`count` elements per rank) and in-place forms.
  // Each is one step between the call's READY and DONE handshakes: the sums read every rank's
  // buffer in one kernel (float32, float16, bfloat16), the moves are device-to-device copies
  // from the peers' mapped buffers (every dtype).
  //   reduce_scatter  out[i] = sum over ranks p of in_p[rank * count + i]; in holds world * count
  //                   (in place: out == in + rank * count)
  //   all_gather      out[p * count + i] = in_p[i]; out holds world * count (in place: in == out + rank * count)
  //   broadcast       buf = buf_root (count elements)
  //   reduce          out_root[i] = sum over ranks of in_p[i]; other ranks' out is not used (may be
  //                   null); in place at the root through the bounce buffer
  //   all_to_all      out[p * count + i] = in_p[rank * count + i]; both hold world * count; in place
  //                   through the bounce buffer
  //   gather          out_root[p * count + i] = in_p[i]; other ranks' out is not used (may be null)
  //   scatter         out[i] = in_root[rank * count + i]; other ranks' in is not used (may be null)
  void reduce_scatter(const void* in, void* out, size_t count, DataType dtype, cudaStream_t stream);
  void all_gather(const void* in, void* out, size_t count, DataType dtype, cudaStream_t stream);
  void broadcast(void* buf, size_t count, DataType dtype, int root, cudaStream_t stream);
  void reduce(const void* in, void* out, size_t count, DataType dtype, int root, cudaStream_t stream);
  void all_to_all(const void* in, void* out, size_t count, DataType dtype, cudaStream_t stream);
  void gather(const void* in, void* out, size_t count, DataType dtype, int root, cudaStream_t stream);
  void scatter(const void* in, void* out, size_t count, DataType dtype, int root, cudaStream_t stream);

  // The parts of a call's cost, for the bench (issue 44 asks for them at 8 B): a call that
  // moves nothing but has both handshakes and their GPU-side waits (barrier), and the host
  // handshakes alone, with no stream involved (host_barrier).
  void barrier(cudaStream_t stream);
  void host_barrier();

  // Evicts the registration holding ptr; call before freeing a buffer used in a collective.
  bool deregister(const void* ptr) { return cache_.deregister(ptr); }
  const RegistrationCache& cache() const { return cache_; }
  const PeerMappings& mappings() const { return mappings_; }

  // This rank's call failed and it leaves the collective: peers waiting for it stop at once.
  void abort() noexcept { flags_.mark_failed(); }

  // Collective: waits for this process's device work, then for every peer to do the same, so
  // no stream still waits on an event about to be destroyed; then frees everything.
  void close();

  int rank() const { return rank_; }
  int world() const { return world_; }
  // Which GPU each rank is on, the same on every rank: the devices' UUIDs are exchanged
  // through the store when the communicator is built. Ranks sharing a GPU take turns on it
  // (without MPS), which the cost model's phase cost depends on (ipc_cost_model.hpp).
  const Placement& placement() const { return placement_; }
  Ordering ordering() const { return opts_.ordering; }

 private:
  enum class Collective : uint32_t {
    all_reduce = 1, reduce_scatter, all_gather, broadcast, reduce, all_to_all, gather, scatter, barrier, host_barrier
  };
  // What every rank must agree on in one call (checked against each peer's descriptor).
  struct Shape {
    Collective kind;
    uint32_t algo;  // all_reduce's Algo, 0 for the others
    size_t count;
    DataType dtype;
    int root;
  };
  // The call's buffers as this process sees them: its own at index rank_ (a bounce buffer in
  // place of one that cannot be exported), the peers' mapped.
  struct Mapped {
    const char* in[kMaxRanks] = {};
    char* out[kMaxRanks] = {};
    // A shared output that was bounced: end_call copies the bounce buffer back to it.
    void* copy_back_to = nullptr;
    size_t copy_back_bytes = 0;
  };
  // Steps 1 and 2 of a call (ipc_comm.cpp): describe it, publish READY, check each peer's
  // descriptor against `shape`, map the buffers each peer shares (in_bytes / out_bytes 0: not
  // shared), and make `stream` wait for the peers' READY. A call reads and writes its own
  // shared buffers through m.in[rank_] and m.out[rank_].
  // bounce_in: copy the input to the bounce buffer even when it could be exported, because this
  // rank writes its output over it while peers read it (the in-place forms of one-shot, reduce
  // and all-to-all).
  Mapped begin_call(const Shape& shape, const void* in, size_t in_bytes, void* out, size_t out_bytes, cudaStream_t stream,
                    bool bounce_in = false);
  // Step 4: DONE, and the stream waits for every peer's; then a bounced output is copied back.
  void end_call(const Mapped& m, cudaStream_t stream);
  void check_open(const char* what) const;
  // Closes the mappings of peer p's registrations that p has retired since the last call.
  void close_retired_mappings(int p, cudaStream_t stream);
  // Waits (host) for every peer's `phase` of the current call, then makes `stream` wait (GPU)
  // on each peer's event for it.
  void handshake(Phase phase, cudaStream_t stream);
  // This rank reached `phase` on `stream`: records its event (or writes its flag), then
  // publishes the phase.
  void signal(Phase phase, cudaStream_t stream);
  // `stream` waits (GPU) for peer p's `phase` of the current call, whose issue the host saw.
  void gpu_wait(int p, Phase phase, cudaStream_t stream);
  // Step 3 of a ring all-reduce (ipc_ring.cpp): 2 (P - 1) steps, each reading one chunk of
  // the left neighbour's buffers, with a handshake with it between steps.
  void ring_all_reduce(const Mapped& m, size_t count, DataType dtype, cudaStream_t stream);

  std::shared_ptr<Store> store_;
  int rank_, world_;
  Options opts_;
  HostFlags flags_;
  std::unique_ptr<IpcEvents> events_;   // Ordering::events only
  std::unique_ptr<GpuFlags> gpu_flags_;  // Ordering::flags only
  RegistrationCache cache_;
  PeerMappings mappings_;
  Placement placement_;
  BounceBuffer bounce_in_{cache_}, bounce_out_{cache_};
  uint64_t seq_ = 0;
  uint64_t retired_seen_[kMaxRanks] = {};
  bool closed_ = false;
};

}  // namespace kolo::cuda_ipc

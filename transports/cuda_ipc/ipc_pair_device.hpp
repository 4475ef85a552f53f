// IpcPairDevice: the cuda_ipc transport in the sense of transports/transport.hpp, a Device
// whose Pairs (ipc_pair.hpp) move device-memory messages between the processes of one node
// with point-to-point semantics (tags, sizes, posting order, the failures), where IpcComm
// (ipc_comm.hpp) runs whole collectives over the same memory. Both rest on the same pieces: the
// registration cache (a buffer is exported once, a peer maps it once), the IpcMemory interface
// (CUDA, or the host stand-in), and a host control channel; the pair's is one unix socket per
// peer (transports/common/seqpacket.hpp) where IpcComm's is a shared segment of flags, because
// a pair must learn of a dead or aborting peer by itself, as every transport does.
//
// Not in the registry (KOLO_REGISTER_TRANSPORT): the engine moves device buffers through its
// staging (host transports) or through IpcComm, and does not post device memory on pairs yet.
// The transport conformance suite reaches it through pair_transport() instead.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "transports/cuda_ipc/ipc_memory.hpp"
#include "transports/cuda_ipc/ipc_pair.hpp"
#include "transports/cuda_ipc/registration_cache.hpp"
#include "transports/transport.hpp"

namespace kolo::cuda_ipc {

class IpcPairDevice final : public transport::Device {
 public:
  // Staging ring per peer and direction, and the largest message staged in it: larger ones are
  // read from the sender's buffer (ipc_pair.hpp).
  static constexpr size_t kRingBytes = size_t(1) << 20;
  static constexpr size_t kEagerMaxBytes = size_t(64) << 10;

  // Connects this rank to `peers` over `memory` (every peer calls it with this rank among its
  // peers, with the same kind of memory).
  static std::unique_ptr<IpcPairDevice> connect(IpcMemory& memory, const transport::Bootstrap& b, const std::vector<int>& peers);
  // Same host: what the shm transport's reaches says.
  static bool reaches(const transport::Bootstrap& b, int peer);
  ~IpcPairDevice() override;

  const char* name() const override { return "cuda_ipc"; }
  transport::Pair* pair(int peer) override;
  bool poll() override;
  // Busy-polled: a copy completes on the GPU, which no file descriptor tells.
  int wait_fd() const override { return -1; }
  bool pairs_fixed() const override { return true; }
  void abort(const std::string& reason) override;
  std::vector<int> close(std::chrono::steady_clock::time_point deadline) override;

  // Evicts the registration of the allocation holding ptr (call before freeing a buffer sent
  // as a large message); peers close their mappings of it.
  bool deregister(const void* ptr) { return cache_->deregister(ptr); }
  const RegistrationCache& cache() const { return *cache_; }
  const PeerMappings& mappings() const { return *mappings_; }

 private:
  IpcPairDevice(IpcMemory& memory, const transport::Bootstrap& b);
  void connect_or_throw(const transport::Bootstrap& b, const std::vector<int>& peers);

  IpcMemory& memory_;
  transport::FailureSink* sink_;
  std::unique_ptr<RegistrationCache> cache_;
  std::unique_ptr<PeerMappings> mappings_;
  std::vector<void*> rings_;                    // this rank's staging rings, one per peer
  std::vector<std::unique_ptr<IpcPair>> pairs_;  // by peer rank
  std::vector<IpcPair*> list_;
};

// The pair device as a TransportInfo (name "cuda_ipc/standin": over the host stand-in, built
// everywhere; "cuda_ipc": over CUDA, only in builds with CUDA), for the conformance suite.
const transport::TransportInfo& standin_pair_transport();
const transport::TransportInfo& cuda_pair_transport();

}  // namespace kolo::cuda_ipc

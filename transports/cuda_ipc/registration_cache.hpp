// The registration cache: which of this rank's allocations have been exported to the peers
// (RegistrationCache), and which of the peers' exports this process has mapped (PeerMappings).
//
// A user buffer is exported once: the first collective on it takes the allocation's base and
// size (cuPointerGetAttributes: RANGE_START_ADDR, RANGE_SIZE) and CUDA's process-wide unique
// BUFFER_ID, makes a cudaIpcMemHandle of the base, and publishes it in the store under a
// generation number of its own ("<prefix>/mem/<rank>/<gen>"). Later calls on any pointer into
// that allocation find it by base and reuse the generation; a call names (generation, offset)
// in its descriptor (host_flags.hpp), and a peer opens each generation it meets once.
//
// Eviction: deregister() before freeing (the explicit path), and, when a lookup finds another
// allocation at a cached base (freed and reallocated: the BUFFER_ID or size differs), the old
// generation is retired and the new allocation exported afresh. Retired generations are posted
// in the host segment; peers close their mappings of them at their next call.
//
// The memory itself is reached through IpcMemory (ipc_memory.hpp): CUDA's IPC handles under
// IpcComm and a GPU pair, or the host stand-in, so that the cache runs in tests without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include "kolo/store.hpp"
#include "transports/cuda_ipc/ipc_memory.hpp"

namespace kolo::cuda_ipc {

class RegistrationCache {
 public:
  // `retired` tells the peers that a generation is gone, so that they close their mappings of
  // it (IpcComm: the host segment's ring, host_flags.hpp; a pair: a record on its socket).
  RegistrationCache(Store& store, std::string prefix, int rank, IpcMemory& memory, std::function<void(uint64_t gen)> retired);
  ~RegistrationCache();  // deregisters nothing: the peers may still hold mappings (see close)

  struct Found {
    uint64_t gen;
    uint64_t offset;  // of ptr from the allocation's base
  };
  // The registration holding [ptr, ptr + bytes), exporting the allocation on a miss; generation
  // 0 when the allocation cannot be exported (AllocationRange::exportable: the caller bounces
  // the data through memory that can, ipc_comm.cpp).
  Found lookup(const void* ptr, size_t bytes);
  // Evicts the allocation holding ptr (call before freeing it); false when it was not cached.
  bool deregister(const void* ptr);
  // Retires every registration (the comm's close).
  void clear();

  size_t entries() const { return by_base_.size(); }
  uint64_t exports() const { return exports_; }  // allocations exported so far (cache misses)

 private:
  struct Entry {
    AllocationRange range;
    uint64_t gen;
  };
  void retire(const Entry& e);

  Store& store_;
  std::string prefix_;
  int rank_;
  IpcMemory& memory_;
  std::function<void(uint64_t)> retired_;
  std::map<uintptr_t, Entry> by_base_;
  uint64_t next_gen_ = 0;
  uint64_t exports_ = 0;
};

class PeerMappings {
 public:
  PeerMappings(Store& store, std::string prefix, IpcMemory& memory);
  ~PeerMappings();  // closes every mapping

  // The base of peer's registration `gen` in this process, opened on first use.
  char* get(int peer, uint64_t gen);
  // Closes peer's registration `gen` if it is open.
  void close(int peer, uint64_t gen);
  void close_peer(int peer);
  void close_all();
  size_t open_count() const { return by_gen_.size(); }

 private:
  struct Mapping {
    std::string handle;  // the exported handle's bytes (a cudaIpcMemHandle_t)
    char* base;
  };
  struct Opened {
    char* base;
    int refs;
  };
  void release(const std::string& handle);

  Store& store_;
  std::string prefix_;
  IpcMemory& memory_;
  std::map<std::pair<int, uint64_t>, Mapping> by_gen_;
  // One open per handle (cudaIpcOpenMemHandle): the same allocation exported again (a new generation
  // after deregister) must not be opened twice in one context.
  std::map<std::string, Opened> by_handle_;
};

}  // namespace kolo::cuda_ipc

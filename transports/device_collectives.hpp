// Collectives that move device memory directly between the processes of one node (CUDA IPC:
// transports/cuda_ipc), as the engine sees them: no CUDA header, a stream is a cudaStream_t as
// void*. A build with CUDA registers the one implementation (KOLO_REGISTER_DEVICE_COLLECTIVES);
// without it make_device_collectives() returns null and every device operation takes the
// staging path through pinned host memory (docs/ARCHITECTURE.md, "Device memory").
//
// Every call is collective: all ranks call it in the same order with the same shape (checked:
// a mismatch throws InvalidArgument), enqueue the work on `stream` and return once it is
// enqueued; the host may block meanwhile until every peer has issued the same call (a
// handshake on shared memory, bounded by the timeout given at creation: TimeoutError names the
// rank that did not come). Counts follow NCCL (elements per rank); the sums are of float32,
// float16 and bfloat16 only (supports_sum).
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kolo/types.hpp"

namespace kolo {
class Store;
}

namespace kolo::transport {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual const char* name() const = 0;
  virtual bool supports_sum(DataType t) const = 0;
  virtual void all_reduce(const void* in, void* out, size_t count, DataType t, void* stream) = 0;
  virtual void reduce_scatter(const void* in, void* out, size_t count, DataType t, void* stream) = 0;
  virtual void all_gather(const void* in, void* out, size_t count, DataType t, void* stream) = 0;
  virtual void broadcast(void* buf, size_t count, DataType t, int root, void* stream) = 0;
  virtual void reduce(const void* in, void* out, size_t count, DataType t, int root, void* stream) = 0;
  virtual void all_to_all(const void* in, void* out, size_t count, DataType t, void* stream) = 0;
  virtual void gather(const void* in, void* out, size_t count, DataType t, int root, void* stream) = 0;
  virtual void scatter(const void* in, void* out, size_t count, DataType t, int root, void* stream) = 0;
  // A buffer about to be freed: forget its registration (peers close their mappings).
  virtual void forget(const void* ptr) = 0;
  // This rank's call failed and it will not go on: peers waiting for it stop at once (with
  // PeerError naming this rank) instead of at their timeout. Not collective; never throws.
  virtual void abort() noexcept = 0;
  // Collective: the last handshake, then everything is released.
  virtual void close() = 0;
};

struct DeviceCollectivesOptions {
  std::string prefix;  // store keys, distinct per communicator of one job
  std::chrono::milliseconds timeout{120000};
  // Non-empty: the reason to stop waiting for peers before the timeout (the group failed).
  std::function<std::string()> stop_check;
};
using DeviceCollectivesMaker = std::unique_ptr<DeviceCollectives> (*)(std::shared_ptr<Store> store, int rank, int world,
                                                                      const DeviceCollectivesOptions& opts);

// Collective (every rank of the node calls it): null when no implementation is built in.
std::unique_ptr<DeviceCollectives> make_device_collectives(std::shared_ptr<Store> store, int rank, int world,
                                                           const DeviceCollectivesOptions& opts);
bool device_collectives_built();

struct DeviceCollectivesRegistration {
  explicit DeviceCollectivesRegistration(DeviceCollectivesMaker make);
};
#define KOLO_REGISTER_DEVICE_COLLECTIVES(maker) \
  static const ::kolo::transport::DeviceCollectivesRegistration kolo_device_collectives_registration { maker }

}  // namespace kolo::transport

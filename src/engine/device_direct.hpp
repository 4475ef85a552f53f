// Device memory moved directly between the processes of one node (transports/device_collectives.hpp:
// CUDA IPC), instead of staged through pinned host memory (device_work.hpp). Chosen per
// operation, the same way on every rank (it depends on the operation and the group only):
// KOLO_CUDA_IPC=1, a build with the device collectives, every rank of the group on this host, a
// group that owns its connections (not a sharing subgroup), a collective they do (all-reduce,
// reduce, reduce-scatter with sum on float32/float16/bfloat16; all-gather, broadcast,
// all-to-all of any type) of at least KOLO_CUDA_IPC_MIN_BYTES per rank. The communicator is
// made at the first such operation (collectively: every rank reaches it there).
//
// The operation is enqueued on the caller's stream by the issuing thread; the host returns
// once every peer has issued it too (the handshake), so its Work is complete on the host at
// once, and its GPU side is an event on that stream (DirectDeviceWork). It takes a collective
// sequence number like any other, but not the engine's queue or flight recorder. A failure
// (a peer that never comes within the timeout, a mismatched call) throws at issue and leaves the
// direct path broken for the group: the caller aborts the group (process_group.cpp).
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "algorithms/collective.hpp"
#include "engine/device_completion.hpp"
#include "kernels/device_runtime.hpp"
#include "kolo/store.hpp"
#include "kolo/work.hpp"
#include "transports/device_collectives.hpp"

namespace kolo::engine {

class DirectDevice {
 public:
  // The group's facts, once it has formed.
  // `stop_check`: non-empty while the group has failed (the executor's view), so that a wait
  // for a dead peer ends early instead of at the timeout.
  void configure(std::shared_ptr<Store> store, std::string prefix, int rank, int size, bool one_host,
                 bool owns_connections, std::chrono::milliseconds timeout, std::function<std::string()> stop_check);
  // Whether `args` (device memory, checked) goes over the device collectives.
  bool wants(const algo::CollArgs& args, kernels::DeviceRuntime& rt) const;
  // Runs it on `stream` (the group's device current). Throws on failure, and the path stays broken.
  WorkPtr run(const algo::CollArgs& args, kernels::DeviceRuntime& rt, void* stream, uint64_t seq);
  // At the group's end: the communicator's last handshake when `orderly` (collective), else a
  // local release.
  void close(bool orderly) noexcept;

 private:
  std::mutex mu_;
  bool enabled_ = false;  // KOLO_CUDA_IPC=1, built in, one host, owns its connections, more than one rank
  size_t min_bytes_ = 0;
  std::shared_ptr<Store> store_;
  std::string prefix_;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_{0};
  std::function<std::string()> stop_check_;
  std::unique_ptr<transport::DeviceCollectives> comm_;  // made at the first operation that wants it
  std::atomic<bool> broken_{false};  // written under mu_, read by wants() without it
};

// A direct device operation's Work: done on the host at issue; its GPU side ends at `event`,
// recorded on the issuing stream behind it.
class DirectDeviceWork final : public Work, public DeviceCompletion {
 public:
  DirectDeviceWork(Work::Token token, const char* op_name, uint64_t seq, kernels::DeviceRuntime& rt, void* stream);
  ~DirectDeviceWork();
  void queue_wait(void* stream) override;
  void* issue_stream() const override { return stream_; }
  void synchronize_gpu(std::chrono::milliseconds timeout) override;
  bool gpu_done() const override;

 private:
  kernels::DeviceRuntime& rt_;
  void* const stream_;
  void* event_;
};

}  // namespace kolo::engine

// A collective or send/receive on device memory, staged through pinned host memory over the
// host transports (docs/ARCHITECTURE.md, "Device memory"):
//   issuing thread: the device inputs are copied into a pinned block on the issuing stream,
//     after the work already queued there, and an event ("ready") is recorded behind them;
//   engine thread: the host operation on the pinned block starts once "ready" has passed
//     (gate()), and runs as any host operation does;
//   its completion (deliver()): the outputs are copied back on the group's copy stream after
//     "ready", the operation's flag is raised behind them, and an event ("done") recorded;
//   Work::wait(): the issuing stream waits for the flag, the host does not wait at all.
// The DeviceWork is the Work its caller holds; the host operation's completion callback keeps it
// alive until then.
#pragma once
#include <chrono>
#include <exception>
#include <memory>

#include "engine/device_completion.hpp"
#include "engine/device_staging.hpp"
#include "engine/task.hpp"
#include "kolo/work.hpp"

namespace kolo::engine {

class DeviceWork final : public Work, public DeviceCompletion, public RunGate {
 public:
  // A device range the operation reads (copied in) and one it writes (copied back), as bytes.
  struct Copy {
    char* device = nullptr;
    char* host = nullptr;
    size_t bytes = 0;
  };

  DeviceWork(Work::Token token, const char* op_name, uint64_t seq, std::shared_ptr<DeviceStaging> staging, void* stream);
  ~DeviceWork();

  // Issue side: takes a pinned block of `block_bytes` (the caller then sets in_/out_'s host
  // pointers into block()), then queues the copies in and records "ready" on the stream.
  char* take_block(size_t block_bytes);
  Copy in[2];
  Copy out;
  void queue_inputs();
  bool needs_gate() const { return in[0].bytes + in[1].bytes > 0; }

  void gate(std::chrono::steady_clock::time_point deadline) override;  // RunGate, engine thread
  void deliver(std::exception_ptr error) noexcept;                     // the host operation ended

  // DeviceCompletion
  bool queue_flag_wait(void* stream) override;
  void queue_event_wait(void* stream) override;
  void* issue_stream() const override { return stream_; }
  void synchronize_gpu(std::chrono::milliseconds timeout) override;
  bool gpu_done() const override;

 private:
  std::shared_ptr<DeviceStaging> staging_;
  kernels::DeviceRuntime& rt_;
  void* const stream_;
  DeviceStaging::Block block_;
  DeviceStaging::Flag flag_;
  void* ready_ = nullptr;
  void* done_ = nullptr;
};

}  // namespace kolo::engine

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
#include <mutex>
#include <vector>

#include "engine/device_completion.hpp"
#include "engine/device_staging.hpp"
#include "engine/task.hpp"
#include "kolo/work.hpp"

namespace kolo::engine {

class DeviceWork final : public Work, public DeviceCompletion {
 public:
  // A device range an operation reads (copied in) or writes (copied back), as bytes.
  struct Copy {
    char* device = nullptr;
    char* host = nullptr;
    size_t bytes = 0;
  };
  // One host operation of the device operation: all of it, or one chunk of a large all-reduce,
  // reduce or broadcast, so that copying chunk k+1 out of device memory overlaps moving chunk k
  // and copying chunk k-1 back (pipelining).
  struct Part final : RunGate {
    DeviceWork* owner = nullptr;
    Copy in[2];
    Copy out;
    void* ready = nullptr;  // recorded on the issuing stream behind the copies in
    bool needs_gate() const { return in[0].bytes + in[1].bytes > 0; }
    void gate(std::chrono::steady_clock::time_point deadline) override;  // engine thread
  };

  DeviceWork(Work::Token token, const char* op_name, uint64_t seq, std::shared_ptr<DeviceStaging> staging, void* stream,
             size_t parts);
  ~DeviceWork();

  // Issue side: a pinned block of `block_bytes` for the parts' host pointers, then (once the
  // parts are filled in) the copies in, each part's followed by its "ready" event.
  char* take_block(size_t block_bytes);
  std::vector<Part> parts;
  void queue_inputs();

  // Part `i`'s host operation ended: its result goes back to device memory; after the last
  // part, the flag is raised and the Work completes (with the first error, if any).
  void deliver(size_t i, std::exception_ptr error) noexcept;

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
  // Recorded behind the last copy back: the block goes back to the staging then, not when the
  // caller drops this Work (the next operation would otherwise pin a new one).
  void* block_done_ = nullptr;
  DeviceStaging::Flag flag_;
  void* done_ = nullptr;
  std::mutex deliver_mu_;  // the parts' ends (in issue order, but failures may come from any thread)
  size_t delivered_ = 0;
  std::exception_ptr first_error_;
};

}  // namespace kolo::engine

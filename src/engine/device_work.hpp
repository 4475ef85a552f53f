// A collective or send/receive on device memory, staged through pinned host memory over the
// host transports (docs/ARCHITECTURE.md, "Device memory"). Every CUDA call is made by the
// issuing thread, at issue; the engine thread only reads and writes flags in pinned host memory,
// so it never waits on a lock of the CUDA runtime that a caller blocked in a synchronous CUDA call
// may hold (a cudaMemcpy to pageable memory behind wait(): the hang torch's DDP met).
//   issuing stream: copy the inputs into a pinned block, raise part k's "ready" flag;
//   copy stream:    per part, after the issuing stream's work before the call (an event) and
//                   once the engine has raised part k's "moved" flag, copy its outputs back;
//                   then raise the operation's "result" flag and record "done";
//   engine thread:  start part k once its ready flag is up (the gate), raise its moved flag when
//                   the host operation ends (also on failure: no stream waits forever; the output
//                   is then undefined, as with NCCL);
//   Work::wait():   the issuing stream waits for the result flag; the host does not wait at all.
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
    void* ready_event = nullptr;    // on the issuing stream behind the copies in (for the copy stream)
    DeviceStaging::Flag ready;      // raised by the issuing stream behind the copies in
    DeviceStaging::Flag moved;      // raised by the engine when the host operation has ended
    bool ready_seen = false;        // the gate saw `ready` (its slot may then be reused)
    bool needs_gate() const { return in[0].bytes + in[1].bytes > 0; }
    void gate(std::chrono::steady_clock::time_point deadline) override;  // engine thread
  };

  DeviceWork(Work::Token token, const char* op_name, uint64_t seq, std::shared_ptr<DeviceStaging> staging, void* stream,
             size_t parts);
  ~DeviceWork();

  // Issue side: a pinned block of `block_bytes` for the parts' host pointers; then, once the
  // parts are filled in, everything the GPU does for the operation (queue()).
  char* take_block(size_t block_bytes);
  std::vector<Part> parts;
  void queue();

  // Part `i`'s host operation ended (engine thread, or whichever ends it): raises its moved
  // flag; after the last part the Work completes (with the first error, if any). No CUDA call.
  void deliver(size_t i, std::exception_ptr error) noexcept;

  // DeviceCompletion
  void queue_wait(void* stream) override;
  void* issue_stream() const override { return stream_; }
  void synchronize_gpu(std::chrono::milliseconds timeout) override;
  bool gpu_done() const override;

 private:
  std::shared_ptr<DeviceStaging> staging_;
  kernels::DeviceRuntime& rt_;
  void* const stream_;
  DeviceStaging::Block block_;  // given back at queue(), to be reused once the GPU is done with it
  DeviceStaging::Flag result_;  // raised by the copy stream behind the copies back
  std::mutex deliver_mu_;       // the parts' ends (in issue order, but failures may come from any thread)
  size_t delivered_ = 0;
  std::exception_ptr first_error_;
};

}  // namespace kolo::engine

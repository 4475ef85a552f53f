// A collective or send/receive on device memory, staged through pinned host memory over the
// host transports (docs/ARCHITECTURE.md, "Device memory"). Every CUDA call is made by the
// issuing thread, at issue; the engine thread only reads and writes flags in pinned host memory,
// so it never waits on a lock of the CUDA runtime that a caller blocked in a synchronous CUDA call
// may hold (a cudaMemcpy to pageable memory behind wait(): the hang torch's DDP met).
//   issuing stream: copy the inputs into a pinned block, raise part k's "ready" flag;
//   copy stream:    per part, after the issuing stream's work before the call (an event) and
//                   once the engine has raised part k's "moved" flag: reduce what the host
//                   operation gathered (on the GPU: the host transports only move bytes), raise
//                   the ready flag of the part that moves the reduced slices, copy outputs back;
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
  // What the GPU reduces once a part has moved: dst[i] = the reduction of src[i],
  // src[stride + i], ... over `ways` arrays (the operation's dtype and op; its last step, avg's
  // division or premul_sum's factor, over the group's size). ways 0: nothing.
  struct Reduction {
    char* dst = nullptr;
    const char* src = nullptr;
    size_t stride = 0;  // bytes
    int ways = 0;
    size_t count = 0;
    char* copy_to = nullptr;  // then copied there (dst is then the staging's device scratch)
  };
  static constexpr size_t kNoPart = static_cast<size_t>(-1);
  // One host operation of the device operation: all of it, or one chunk of a large all-reduce,
  // reduce or broadcast, so that copying chunk k+1 out of device memory overlaps moving chunk k
  // and copying chunk k-1 back (pipelining); a reduction's chunk may take two (an all-to-all,
  // then, after the GPU has reduced the slices, a gather of the reduced slices: device_issue.cpp).
  struct Part final : RunGate {
    DeviceWork* owner = nullptr;
    Copy in[2];                     // issuing stream, before `ready`
    Reduction reduce;               // copy stream, once moved
    size_t feeds = kNoPart;         // the part whose `ready` the copy stream raises after `reduce`
    Copy out;                       // copy stream, once moved (after `reduce`)
    bool gated = false;             // the engine starts it once `ready` is up
    bool ready_from_gpu = false;    // `ready` is raised by the copy stream (`feeds`), not the issuing stream
    void* ready_event = nullptr;    // on the issuing stream behind the copies in (for the copy stream)
    DeviceStaging::Flag ready;      // raised behind the copies in, or behind an earlier part's reduction
    DeviceStaging::Flag moved;      // raised by the engine when the host operation has ended
    bool ready_seen = false;        // the gate saw `ready` (its slot may then be reused)
    bool needs_gate() const { return gated; }
    bool acts_after() const { return reduce.ways > 0 || feeds != kNoPart || out.bytes > 0; }
    void gate(std::chrono::steady_clock::time_point deadline) override;  // engine thread
  };

  DeviceWork(Work::Token token, const char* op_name, uint64_t seq, std::shared_ptr<DeviceStaging> staging, void* stream,
             size_t parts);
  ~DeviceWork();

  // Issue side: a pinned block of `block_bytes` for the parts' host pointers; then, once the
  // parts are filled in, everything the GPU does for the operation (queue()).
  char* take_block(size_t block_bytes);
  char* device_scratch(size_t bytes) { return staging_->device_scratch(bytes); }
  std::vector<Part> parts;
  // The parts' reductions: dtype, op and the group's size (avg divides by it).
  DataType dtype = DataType::float32;
  ReduceOp op;
  int nranks = 1;
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

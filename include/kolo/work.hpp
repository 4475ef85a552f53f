// An asynchronous operation's handle, like c10d::Work. Collectives issued on one group start and
// complete in issue order; wait() rethrows the collective's error.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kolo {

namespace engine {
class WorkRunner;       // src/engine/work_access.hpp: how the engine drives a Work
struct WorkAccess;
class DeviceCompletion;  // src/engine/device_work.hpp: the GPU side of a device operation
}  // namespace engine

class Work {
 public:
  static constexpr std::chrono::milliseconds kNoTimeout{-1};

  // Only the engine makes Works (ProcessGroup's calls return them): the token says so.
  class Token {
    friend struct engine::WorkAccess;
    Token() = default;
  };
  Work(Token, const char* op_name, uint64_t seq) : op_name_(op_name), seq_(seq) {}
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the operation completes. Throws the operation's error if it failed, and
  // TimeoutError if `timeout` (when not kNoTimeout) passes first; the operation itself is still
  // bounded by its own Options.timeout and will fail on its own if a peer is stuck.
  // The released-and-succeeded case (every synchronous caller's) is inline: a load and two
  // tests, where a call saved registers on the stack right after the collective's last send.
  //
  // An operation on device (CUDA) buffers follows c10d's ProcessGroupNCCL instead: wait() makes
  // the stream the operation was issued on (Options.stream) wait for its result and returns
  // without blocking the host; it throws the error if one is already known (`timeout` is not
  // used). synchronize() is the host-blocking form.
  void wait(std::chrono::milliseconds timeout = kNoTimeout) {
    if (device_ == nullptr && (state_.load(std::memory_order_acquire) & kReleased) && !error_) return;
    wait_slow(timeout);
  }
  // Device operations: makes `stream` (a cudaStream_t cast to void*) wait for the result, as
  // wait() does for the issuing stream (torch passes its current stream). Host operations: wait(timeout).
  void wait_stream(void* stream, std::chrono::milliseconds timeout = kNoTimeout);
  // Blocks the host until the operation has completed, its copies to device memory included;
  // throws its error, or TimeoutError when `timeout` (not kNoTimeout) passes first.
  void synchronize(std::chrono::milliseconds timeout = kNoTimeout);
  bool on_device() const { return device_ != nullptr; }
  // Done: failed, or succeeded with its result in place (in device memory too for a device
  // operation: its copies back have run on the GPU).
  bool is_completed() const;
  bool is_success() const;             // completed and no error
  std::exception_ptr exception() const;  // null while running or on success
  // Runs `fn` once when the operation completes (on the thread that completes it), or at once
  // on the calling thread if it already has. Callbacks registered before completion have run by
  // the time wait() returns. Exceptions thrown by `fn` are swallowed and logged.
  void on_complete(std::function<void(Work&)> fn);

  std::string op_name() const { return op_name_; }
  uint64_t seq() const { return seq_; }
  // A receive: the rank its message came from (for a receive from kAnySource, known once it
  // has completed; -1 before). -1 for every other operation.
  int source_rank() const { return source_rank_.load(std::memory_order_acquire); }

 private:
  friend struct engine::WorkAccess;
  void finish(std::exception_ptr error);
  void wait_slow(std::chrono::milliseconds timeout);
  void wait_host(std::chrono::milliseconds timeout);  // until released; rethrows the error

  // Fixed for the operation; the engine renews a Work nobody holds any more for the next one
  // (WorkAccess::renew), in place of destroying it and making another.
  const char* op_name_;  // a static name ("allreduce"): no allocation per operation
  uint64_t seq_;
  // The Work's whole state in one word, so that completing costs one atomic operation when
  // nobody registered a callback: kFinishing (finish() ran: it runs once), kDone (the result is
  // known: is_completed(); error_ is set), kReleased (callbacks have run: wait() may return),
  // kCallbacks (on_complete() was called before completion), and above them the number of
  // threads in wait() that may sleep on the word (a futex). Every side announces itself in the
  // word and then looks at the others' bits, with sequentially consistent read-modify-writes, so
  // at least one of two racing sides sees the other.
  static constexpr uint32_t kFinishing = 1, kDone = 2, kReleased = 4, kCallbacks = 8, kSleeper = 16;
  std::atomic<uint32_t> state_{0};
  mutable std::mutex mu_;  // callbacks_ only
  void sleep_until_released(std::chrono::milliseconds timeout);
  void wake_sleepers();
  std::exception_ptr error_;  // written once, before kDone is set; read after kDone is seen
  std::vector<std::function<void(Work&)>> callbacks_;
  std::weak_ptr<engine::WorkRunner> runner_;  // set once, before the operation is queued
  uint64_t ticket_ = 0;
  std::atomic<int> source_rank_{-1};  // written by the engine before finish()
  // Set once at construction for a device operation (the engine's DeviceWork); null otherwise.
  engine::DeviceCompletion* device_ = nullptr;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace kolo

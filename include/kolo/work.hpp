// An asynchronous operation's handle, like c10d::Work. Collectives issued on one group start and
// complete in issue order; wait() rethrows the collective's error.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kolo {

class Work;

// Engine internal. Lets wait() run a still-queued operation on the waiting thread instead of
// handing it to the group's engine thread and sleeping until that thread is done: a synchronous
// caller (issue, then wait at once) then pays no thread hand-off at all.
class WorkRunner {
 public:
  virtual ~WorkRunner() = default;
  // Runs `w`'s operation, and whatever was queued before it, now if none has started and the
  // engine thread is idle; true if it did. `wait_timeout` is the waiter's own bound.
  virtual bool run_inline(Work& w, std::chrono::milliseconds wait_timeout) = 0;
  // Someone polls `w` (is_completed()): the engine thread must not leave it for a waiter.
  virtual void nudge(Work& w) = 0;
};

class Work {
 public:
  static constexpr std::chrono::milliseconds kNoTimeout{-1};

  Work(std::string op_name, uint64_t seq) : op_name_(std::move(op_name)), seq_(seq) {}
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the operation completes. Throws the operation's error if it failed, and
  // TimeoutError if `timeout` (when not kNoTimeout) passes first; the operation itself is still
  // bounded by its own Options.timeout and will fail on its own if a peer is stuck.
  void wait(std::chrono::milliseconds timeout = kNoTimeout);
  bool is_completed() const;
  bool is_success() const;             // completed and no error
  std::exception_ptr exception() const;  // null while running or on success
  // Runs `fn` once when the operation completes (on the thread that completes it), or at once
  // on the calling thread if it already has. Callbacks registered before completion have run by
  // the time wait() returns. Exceptions thrown by `fn` are swallowed and logged.
  void on_complete(std::function<void(Work&)> fn);

  const std::string& op_name() const { return op_name_; }
  uint64_t seq() const { return seq_; }

  // Called by the engine, not by users.
  void finish(std::exception_ptr error);
  // `ticket` lets the runner find the operation in its queue without searching it.
  void set_runner(std::weak_ptr<WorkRunner> runner, uint64_t ticket) {
    runner_ = std::move(runner);
    ticket_ = ticket;
  }
  uint64_t runner_ticket() const { return ticket_; }

 private:
  const std::string op_name_;
  const uint64_t seq_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;      // the result is known (is_completed())
  bool released_ = false;  // callbacks have run: wait() may return
  std::atomic<bool> released_flag_{false};  // the same, for wait()'s brief lock-free polling
  std::exception_ptr error_;
  std::vector<std::function<void(Work&)>> callbacks_;
  std::weak_ptr<WorkRunner> runner_;  // set once, before the operation is queued
  uint64_t ticket_ = 0;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace kolo

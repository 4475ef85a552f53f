#include "kolo/work.hpp"

#include "engine/device_completion.hpp"
#include "engine/work_access.hpp"

#include <algorithm>
#include <ctime>
#include <thread>

#include "common/futex_lock.hpp"
#include "common/log.hpp"
#include "kolo/error.hpp"

namespace kolo {

// state_ is a plain 32-bit word in memory, so a sleeper waits on it with a futex: woken when
// finish() changes it, and never asleep on a value that already says kReleased (the kernel
// compares before it sleeps).

void Work::wait_slow(std::chrono::milliseconds timeout) {
  if (device_)
    wait_stream(device_->issue_stream(), timeout);
  else
    wait_host(timeout);
}

void Work::wait_stream(void* stream, std::chrono::milliseconds timeout) {
  if (!device_) return wait(timeout);
  if (auto error = exception()) std::rethrow_exception(error);
  device_->queue_wait(stream);
}

void Work::synchronize(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  wait_host(timeout);
  if (!device_) return;
  auto left = kNoTimeout;
  if (timeout >= std::chrono::milliseconds::zero())
    left = std::max(std::chrono::milliseconds::zero(),
                    timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
  device_->synchronize_gpu(left);
}

void Work::wait_host(std::chrono::milliseconds timeout) {
  if (!(state_.load(std::memory_order_acquire) & kReleased)) {
    if (auto runner = runner_.lock()) runner->run_inline(*this, timeout);
    // Small collectives finish within microseconds: check a few times, yielding the core, before
    // paying for a sleep and a wake-up.
    for (int i = 0; i < 64 && !(state_.load(std::memory_order_acquire) & kReleased); ++i) std::this_thread::yield();
    if (!(state_.load(std::memory_order_acquire) & kReleased)) sleep_until_released(timeout);
  }
  // error_ was written before kDone was set, and kReleased after it.
  if (error_) std::rethrow_exception(error_);
}

void Work::sleep_until_released(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  // Announce the sleep in the word before looking at it: finish() sets kReleased with a
  // read-modify-write and then reads the sleeper count from the value it replaced, so either it
  // sees us and wakes the futex, or our look below sees kReleased.
  state_.fetch_add(kSleeper, std::memory_order_seq_cst);
  struct Leave {
    std::atomic<uint32_t>& s;
    ~Leave() { s.fetch_sub(kSleeper, std::memory_order_relaxed); }
  } leave{state_};
  for (;;) {
    const uint32_t s = state_.load(std::memory_order_seq_cst);
    if (s & kReleased) return;
    timespec rel{};
    if (timeout >= std::chrono::milliseconds::zero()) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero())
        throw TimeoutError("kolo: wait() gave up after " + std::to_string(timeout.count()) + " ms: " + op_name_ + " #" +
                           std::to_string(seq_) + " is still running");
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      rel.tv_sec = static_cast<time_t>(ns / 1000000000);
      rel.tv_nsec = static_cast<long>(ns % 1000000000);
    }
    // Sleeps only while the word still holds `s`: any change (a release, another sleeper
    // arriving or leaving) returns at once and the loop looks again.
    futex_detail::wait(state_, s, timeout >= std::chrono::milliseconds::zero() ? &rel : nullptr);
  }
}

void Work::wake_sleepers() { futex_detail::wake(state_, INT_MAX); }

bool Work::is_completed() const {
  if (state_.load(std::memory_order_acquire) & kDone) return device_ == nullptr || error_ || device_->gpu_done();
  if (auto runner = runner_.lock()) runner->nudge(const_cast<Work&>(*this));
  return false;
}

bool Work::is_success() const { return is_completed() && !error_; }

std::exception_ptr Work::exception() const { return (state_.load(std::memory_order_acquire) & kDone) ? error_ : nullptr; }

void Work::on_complete(std::function<void(Work&)> fn) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Announce the callback and look at kDone in one step: either finish() has not set kDone yet
    // (it then sees kCallbacks and takes the list under this lock, after our push), or we see
    // kDone and run the callback here.
    if (!(state_.fetch_or(kCallbacks, std::memory_order_seq_cst) & kDone)) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  try {
    fn(*this);
  } catch (const std::exception& e) {
    KOLO_LOG(warn, "a completion callback of " << op_name_ << " #" << seq_ << " threw: " << e.what());
  }
}

void Work::finish(std::exception_ptr error) {
  uint32_t s = state_.load(std::memory_order_relaxed);
  if (!error) {
    // The usual case, success with no callback: finishing, done and released in one step (error_
    // stays null). A callback registered or a finish begun meanwhile fails the exchange.
    while (!(s & (kFinishing | kCallbacks))) {
      if (state_.compare_exchange_weak(s, s | kFinishing | kDone | kReleased, std::memory_order_seq_cst)) {
        if (s >= kSleeper) wake_sleepers();
        return;
      }
    }
  }
  if (state_.fetch_or(kFinishing, std::memory_order_acq_rel) & kFinishing) return;  // it runs once
  error_ = std::move(error);
  s = state_.fetch_or(kDone, std::memory_order_seq_cst);  // publishes error_
  // Callbacks run before waiters are released, so that after wait() returns every callback
  // registered before completion has run.
  if (s & kCallbacks) {
    std::vector<std::function<void(Work&)>> cbs;
    {
      std::lock_guard<std::mutex> lk(mu_);
      cbs.swap(callbacks_);
    }
    for (auto& fn : cbs) {
      try {
        fn(*this);
      } catch (const std::exception& e) {
        KOLO_LOG(warn, "a completion callback of " << op_name_ << " #" << seq_ << " threw: " << e.what());
      }
    }
  }
  if (state_.fetch_or(kReleased, std::memory_order_seq_cst) >= kSleeper) wake_sleepers();
}

}  // namespace kolo

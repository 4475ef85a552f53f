#include "kolo/work.hpp"

#include "engine/work_access.hpp"

#include <thread>

#include "common/log.hpp"
#include "kolo/error.hpp"

namespace kolo {

void Work::wait(std::chrono::milliseconds timeout) {
  if (!released_flag_.load(std::memory_order_acquire))
    if (auto runner = runner_.lock()) runner->run_inline(*this, timeout);
  // Small collectives finish within microseconds: check a few times, yielding the core, before
  // paying for a sleep and a wake-up.
  for (int i = 0; i < 64 && !released_flag_.load(std::memory_order_acquire); ++i) std::this_thread::yield();
  if (released_flag_.load(std::memory_order_acquire)) {
    // Released (the usual case once run inline): error_ was written before the flag's release
    // store, so no lock is needed to read it.
    if (error_) std::rethrow_exception(error_);
    return;
  }
  std::unique_lock<std::mutex> lk(mu_);
  if (timeout < std::chrono::milliseconds::zero()) {
    cv_.wait(lk, [&] { return released_; });
  } else if (!cv_.wait_for(lk, timeout, [&] { return released_; })) {
    throw TimeoutError("kolo: wait() gave up after " + std::to_string(timeout.count()) + " ms: " + op_name_ + " #" +
                       std::to_string(seq_) + " is still running");
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::is_completed() const {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_) return true;
  }
  if (auto runner = runner_.lock()) runner->nudge(const_cast<Work&>(*this));
  return false;
}

bool Work::is_success() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_ && !error_;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

void Work::on_complete(std::function<void(Work&)> fn) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!done_) {
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
  // Callbacks run before waiters are released, so that after wait() returns every callback
  // registered before completion has run.
  std::vector<std::function<void(Work&)>> cbs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_) return;
    done_ = true;
    error_ = std::move(error);
    cbs.swap(callbacks_);
  }
  for (auto& fn : cbs) {
    try {
      fn(*this);
    } catch (const std::exception& e) {
      KOLO_LOG(warn, "a completion callback of " << op_name_ << " #" << seq_ << " threw: " << e.what());
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    released_ = true;
    released_flag_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

}  // namespace kolo

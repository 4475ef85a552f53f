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
  if (!released_flag_.load(std::memory_order_acquire)) {
    // Announce the sleep before looking at the flag under the lock: finish() stores the flag
    // before it reads sleepers_, so either it sees us and notifies under the lock, or we see
    // the flag and never sleep.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    struct Leave {
      std::atomic<int>& n;
      ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
    } leave{sleepers_};
    std::unique_lock<std::mutex> lk(mu_);
    const auto released = [&] { return released_flag_.load(std::memory_order_seq_cst); };
    if (timeout < std::chrono::milliseconds::zero()) {
      cv_.wait(lk, released);
    } else if (!cv_.wait_for(lk, timeout, released)) {
      throw TimeoutError("kolo: wait() gave up after " + std::to_string(timeout.count()) + " ms: " + op_name_ + " #" +
                         std::to_string(seq_) + " is still running");
    }
  }
  // error_ was written before the flag's release store.
  if (error_) std::rethrow_exception(error_);
}

bool Work::is_completed() const {
  if (done_.load(std::memory_order_acquire)) return true;
  if (auto runner = runner_.lock()) runner->nudge(const_cast<Work&>(*this));
  return false;
}

bool Work::is_success() const { return done_.load(std::memory_order_acquire) && !error_; }

std::exception_ptr Work::exception() const { return done_.load(std::memory_order_acquire) ? error_ : nullptr; }

void Work::on_complete(std::function<void(Work&)> fn) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Announce the callback before looking at done_; finish() stores done_ before it reads
    // has_callbacks_: either it sees the callback (and takes it under this lock), or we see
    // done_ and run it here.
    has_callbacks_.store(true, std::memory_order_seq_cst);
    if (!done_.load(std::memory_order_seq_cst)) {
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
  if (finishing_.exchange(true, std::memory_order_acq_rel)) return;
  error_ = std::move(error);
  done_.store(true, std::memory_order_seq_cst);
  // Callbacks run before waiters are released, so that after wait() returns every callback
  // registered before completion has run. Without any, no lock is taken.
  if (has_callbacks_.load(std::memory_order_seq_cst)) {
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
  released_flag_.store(true, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    // A waiter announced its sleep: it is either before its look at the flag (and will see it)
    // or inside cv_.wait; taking the lock orders our notify after that.
    { std::lock_guard<std::mutex> lk(mu_); }
    cv_.notify_all();
  }
}

}  // namespace kolo

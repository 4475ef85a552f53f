// The executor's engine thread (docs/ARCHITECTURE.md, "Who runs an operation"): it takes what
// callers leave to it (operations issued with overlap, deferred ones nobody came for within the
// inline window), polls posted sends and receives, notices a peer's failure while idle, and
// runs the close. The queue and the one way an operation runs are in executor.cpp, the waiter
// in executor_waiter.cpp, the caller at issue in executor_direct.cpp.
#include <algorithm>
#include <thread>
#include <utility>

#include "common/cpu_relax.hpp"
#include "common/log.hpp"
#include "engine/executor.hpp"
#include "engine/running_operations.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;

void Executor::wait_for_work() {
  // A training loop or benchmark issues the next operation within microseconds; polling the
  // queue briefly (yielding the core) saves a futex wake-up per operation.
  auto until = Clock::now() + wait_.spin;
  while (queue_.size_unlocked() == 0 && Clock::now() < until) {
    if (pending_n_.load(std::memory_order_acquire) > 0 || ctx_->has_failure()) return;
    std::this_thread::yield();
  }
}

// With run_mu_ held (through `run`): the next operation to run, or false when there is none
// but in-flight point-to-point operations or a failure need attention. Waits without run_mu_, so
// that a waiting caller can run a deferred operation itself meanwhile.
bool Executor::take_next(std::unique_lock<AsymmetricLock>& run, Task** out) {
  // Even with nothing to do, look at the transports now and then: a peer may fail while idle.
  constexpr auto kIdleCheck = std::chrono::milliseconds(10);
  // While callers are expected to run their operations (deferral on), an idle sleep lasts at
  // most one (stretched) window: a deferred operation wakes nobody when it is issued, and one
  // whose caller does not come (an isend before a long computation) must be found and taken
  // within two windows, not after the idle check's 10 ms.
  const auto idle_sleep = [&] {
    const auto w = std::chrono::duration_cast<std::chrono::microseconds>(kIdleCheck);
    const auto floor = std::chrono::microseconds(100);  // KOLO_INLINE_WINDOW_US=0: no busy loop
    return predict_inline_.load(std::memory_order_relaxed) ? std::clamp(engine_window(), floor, w) : w;
  };
  std::unique_lock<FutexLock> lk(mu_);
  for (;;) {
    const bool attention = !pending_.empty() || (ctx_->has_failure() && !failed_);
    Clock::time_point until;
    if (!queue_.empty()) {
      Task& f = queue_.front();
      const auto now = f.deferred ? Clock::now() : Clock::time_point{};
      const bool young = f.deferred && now < due(f, now);
      if (!young) {
        // A deferred operation nobody came for: the caller overlaps; stop deferring, and take
        // what it queued behind it without waiting out a window for each.
        if (f.deferred) {
          predict_inline_.store(false, std::memory_order_relaxed);
          window_stretch_ = 1;
          for (size_t i = 1; i < queue_.size(); ++i) queue_[i].deferred = false;
        }
        *out = &f;
        idle_timers_ = 0;  // working: the next idle spell starts with windows again
        queue_.pop_front();
        return true;
      }
      if (attention) return false;
      until = due(f, now);
    } else {
      if (attention) return false;
      until = Clock::now() + idle_sleep();
    }
    const uint32_t gen = wake_.read();
    uint64_t waited_ticket = queue_.empty() ? UINT64_MAX : queue_.front().ticket;
    lk.unlock();
    run.unlock();
    // Sleep without run_mu_, and wake up without it too: when the timer goes off while a caller
    // runs the queue's front inline (the usual case: it arrived within the window), taking
    // run_mu_ here would block this thread on it and make the caller pay a futex wake-up at its
    // unlock. So look first, under mu_ only, whether anything is due.
    // Every timer that finds its operation gone (run inline by its caller) doubles the time the
    // engine gives the next ones, up to kMaxStretch windows: a thread woken every window costs a
    // context switch each time, which is most of a small collective's time when ranks outnumber
    // cores. An operation found overdue resets it (take_next above).
    for (;;) {
      wake_.sleep(gen, until);
      if (wake_.read() != gen) break;  // woken: look again from the top
      const auto now = Clock::now();
      if (now < until) continue;  // a spurious return
      std::lock_guard<FutexLock> w(mu_);
      if (ctx_->has_failure()) break;
      if (queue_.empty() || queue_.front().ticket != waited_ticket) window_stretch_ = std::min(2 * window_stretch_, kMaxStretch);
      if (queue_.empty()) {
        // Sends or receives in flight need polling (whoever posted them should have woken this
        // thread; this bounds the cost should one not have).
        if (pending_n_.load(std::memory_order_acquire) > 0) break;
        if (window_stretch_ == kMaxStretch && ++idle_timers_ >= kDeepIdleAfter) {
          idle_deep_ = true;  // from now on a deferred operation wakes this thread (submit)
          until = now + kIdleCheck;
        } else {
          until = now + idle_sleep();
        }
        continue;
      }
      const Task& f = queue_.front();
      if (!f.deferred || now >= due(f, now)) break;  // due: take it
      waited_ticket = f.ticket;
      until = due(f, now);  // a later operation, still left for its caller
    }
    run.lock();
    lk.lock();
    idle_deep_ = false;  // awake: a deferred operation is seen at the next look, as before
  }
}

Clock::time_point Executor::due(const Task& f, Clock::time_point now) {
  // A window from when this thread first saw the operation at the queue's front: callers read
  // no clock when they issue, and one that came later than that window would come later than
  // the window from its issue too.
  if (f.ticket != front_seen_ticket_) {
    front_seen_ticket_ = f.ticket;
    front_seen_at_ = now;
  }
  return front_seen_at_ + engine_window();
}

void Executor::loop() {
  RunningOperations mark;
  std::unique_lock<AsymmetricLock> run(run_mu_);
  for (;;) {
    Task* next = nullptr;
    run.unlock();
    wait_for_work();
    run.lock();
    const uint64_t key = ctx_->wake_key();  // before take_next looks at the queue
    if (!take_next(run, &next)) {
      // Idle but point-to-point operations are in flight, or a failure needs handling.
      if (ctx_->has_failure() && !failed_) {
        // A peer failed while this rank was idle: the next operation reports it.
        fail_group_from_context();
        continue;
      }
      if (!ctx_->poll()) ctx_->block(std::chrono::microseconds(1000), key);
      check_pending();
      continue;
    }
    switch (next->type) {
      case Task::Type::collective:
      case Task::Type::point_to_point:
        run_task(*next);
        break;
      case Task::Type::close: {
        // Finish what is in flight, then say goodbye.
        while (!pending_.empty() && !failed_) {
          if (!ctx_->poll()) ctx_->block(std::chrono::microseconds(1000));
          check_pending();
        }
        if (!failed_ && ctx_->has_failure()) {
          try {
            raise_failure("shutdown of rank " + std::to_string(group_.rank) + " of " + std::to_string(group_.size) +
                              " (group " + group_.name + ")",
                          ctx_->failure());
          } catch (const Error& e) {
            group_error_ = std::current_exception();
            group_error_text_ = e.what();
            fail_group(e, group_);
          }
        }
        // A failure no operation reported (a peer aborted after this rank's last operation, say
        // a broadcast root whose receivers saw a mismatch) is reported by shutdown() instead;
        // the user's own abort() is not.
        if (failed_ && !error_delivered_ && !user_aborted_.load()) close_error_ = group_error_;
        if (!failed_) {
          auto missing = ctx_->close(Clock::now() + close_timeout_);
          if (ctx_->has_failure()) {
            // A peer aborted after this rank's last operation finished (e.g. it was the root of
            // a broadcast that another rank could not match): report it from shutdown().
            try {
              raise_failure("shutdown of rank " + std::to_string(group_.rank) + " of " + std::to_string(group_.size) +
                                " (group " + group_.name + ")",
                            ctx_->failure());
            } catch (const Error&) {
              close_error_ = std::current_exception();
            }
          }
          if (!missing.empty()) {
            std::string list;
            for (int p : missing) list += (list.empty() ? "" : ", ") + std::to_string(p);
            KOLO_LOG(warn, "group " << group_.name << ": rank(s) " << list << " did not say goodbye within the timeout");
          }
        }
        return;
      }
    }
    check_pending();
  }
}
}  // namespace kolo::engine

// The executor's waiter (docs/ARCHITECTURE.md, "Who runs an operation"): a caller that waits
// for an operation still queued runs it, and what was queued before it, on its own thread
// (run_inline); a send or receive it waits for is polled there too (drive_point_to_point). The
// queue and the one way an operation runs are in executor.cpp, the engine thread in
// executor_thread.cpp, the caller at issue in executor_direct.cpp.
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

// The waiter's bound leaves the operation's own timeout time to end it (negative: no bound).
static bool within(std::chrono::milliseconds wait_timeout, std::chrono::milliseconds op_timeout) {
  return wait_timeout < std::chrono::milliseconds::zero() || wait_timeout >= op_timeout;
}

bool Executor::run_inline(Work& w, std::chrono::milliseconds wait_timeout) {
  // A caller waits for an operation that has not completed: callers are waiting again, so defer
  // the next collectives to them. (Setting this only when the inline run succeeds, as before,
  // never recovered once the engine thread had taken over: it takes every later operation
  // before its caller arrives, and the caller then finds nothing to run inline.)
  predict_inline_.store(true, std::memory_order_relaxed);
  bool only_receives_behind = false;  // w is a lone send/receive with only receives queued after it
  std::unique_lock<AsymmetricLock> run(run_mu_, std::defer_lock);
  if (inline_enabled_ && running_operations == 0) (void)run.try_lock();
  {
    std::unique_lock<FutexLock> lk(mu_);
    const size_t k = queue_.find(w);
    if (k == SIZE_MAX) {
      // Running or done, or a send or receive already posted (by an earlier inline run): with
      // the engine thread idle, poll for it here rather than sleep until that thread does.
      lk.unlock();
      const Pending* p = run.owns_lock() ? find_pending(w) : nullptr;
      if (!p || !within(wait_timeout, p->task->timeout)) return false;
      RunningOperations mark;
      drive_point_to_point(w);
      return true;
    }
    // Only operations the caller may run (not the close), in issue order, and only if the
    // waiter does not want to be released before the operations' own timeouts could end them.
    bool ok = run.owns_lock();
    only_receives_behind = k == 0 && queue_[0].type == Task::Type::point_to_point && queue_.only_receives_from(1);
    for (size_t i = 0; ok && i <= k; ++i)
      ok = queue_[i].type != Task::Type::close && within(wait_timeout, queue_[i].timeout);
    if (!ok) {
      undefer_through(k);  // the waiter will sleep: the engine thread must run them now
      return false;
    }
    for (size_t i = 0; i <= k; ++i) inline_batch_.push_back(&queue_.pop_front());
  }
  RunningOperations mark;
  // `w` stays alive throughout: its caller holds a reference.
  if (inline_batch_.size() == 1 && pending_.empty() && run_waited_direct(*inline_batch_.front(), only_receives_behind)) {
    inline_batch_.clear();
    return true;
  }
  for (Task* t : inline_batch_) run_task(*t);
  inline_batch_.clear();  // keeps its capacity: the next inline run allocates nothing
  check_pending();
  // A send or receive is posted now; the caller polls until it completes.
  if (!WorkAccess::released(w)) {
    drive_point_to_point(w);
  } else if (!pending_.empty()) {
    // `w` completed, but sends or receives run before it are still in flight: the engine thread
    // must poll for them. Asleep with nothing queued it would not look (their callers may
    // already sleep on them, having found the run lock taken by this run).
    std::lock_guard<FutexLock> lk(mu_);
    wake_.bump_and_wake();
  }
  return true;
}

// The waiter's run of a posted send or receive: the polling the engine thread would do, on the
// waiting thread, which saves the hand-off to that thread and back (two wake-ups, and with
// ranks outnumbering cores two context switches). Later sends and receives are posted as they
// are issued, as the engine thread would post them: the peer may need one of them before it
// answers the operation waited for (two ranks that each wait for their send before their
// receive). A queued collective (or close) ends the run: the engine thread takes over, since
// that may take longer than the waiter's bound, and the waiter sleeps until its operation ends.
void Executor::drive_point_to_point(Work& w) {
  // As EngineComm::wait: pure polls first, the clock read only once polls find nothing (and
  // every kClockEvery polls while data moves, to bound the wait by the deadlines), then polls
  // that yield the core for KOLO_SPIN_US, then sleeps in Context::block.
  constexpr unsigned kClockEvery = 1024;
  Clock::time_point spin_until{};
  int idle_polls = 0;
  unsigned polls = 0;
  bool handed_over = false;
  while (!WorkAccess::released(w)) {
    const uint64_t key = ctx_->wake_key();  // before the look at the queue: see Context::block
    if (queue_.size_unlocked(std::memory_order_seq_cst) > 0 && !post_queued_point_to_point()) {
      handed_over = true;
      break;
    }
    const bool moved = ctx_->poll();
    ++polls;
    if (moved || ctx_->has_failure()) {
      check_pending(polls % kClockEvery == 0 ? Clock::now() : Clock::time_point::min());
      continue;
    }
    if (++idle_polls <= wait_.pure_spin_polls) {
      cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    check_pending(now);  // deadlines
    if (WorkAccess::released(w)) break;
    if (spin_until == Clock::time_point{}) spin_until = now + wait_.spin;
    if (now < spin_until) std::this_thread::yield();
    else if (!ctx_->poll()) ctx_->block(std::chrono::microseconds(1000), key);  // an issue or abort ends it
  }
  // What is still in flight (a send the peer has not read yet) or queued is the engine thread's.
  if (handed_over || !pending_.empty()) {
    std::lock_guard<FutexLock> lk(mu_);
    if (!queue_.empty()) undefer_through(0);
    wake_.bump_and_wake();
  }
}

// Posts the sends and receives at the queue's front; false if a collective (or the close) is
// next, which the engine thread runs.
bool Executor::post_queued_point_to_point() {
  bool collective_next;
  {
    std::lock_guard<FutexLock> lk(mu_);
    while (!queue_.empty() && queue_.front().type == Task::Type::point_to_point)
      inline_batch_.push_back(&queue_.pop_front());
    collective_next = !queue_.empty();
  }
  for (Task* t : inline_batch_) run_task(*t);
  inline_batch_.clear();
  return !collective_next;
}
}  // namespace kolo::engine

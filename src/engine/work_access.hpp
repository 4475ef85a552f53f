// How the engine drives a Work, kept out of the public header: it makes Works, ties them to the
// executor that may run them inline, and finishes them.
#pragma once
#include <chrono>
#include <exception>
#include <memory>
#include <new>

#include "engine/work_pool.hpp"
#include "kolo/work.hpp"

namespace kolo::engine {

// Lets wait() run a still-queued operation on the waiting thread instead of handing it to the
// group's engine thread and sleeping until that thread is done: a synchronous caller (issue,
// then wait at once) then pays no thread hand-off at all.
class WorkRunner {
 public:
  virtual ~WorkRunner() = default;
  // Runs `w`'s operation, and whatever was queued before it, now if none has started and the
  // engine thread is idle; true if it did. `wait_timeout` is the waiter's own bound.
  virtual bool run_inline(Work& w, std::chrono::milliseconds wait_timeout) = 0;
  // Someone polls `w` (is_completed()): the engine thread must not leave it for a waiter.
  virtual void nudge(Work& w) = 0;
};

struct WorkAccess {
  // `op_name` must outlive the Work (a string literal or a static name).
  static WorkPtr make(const char* op_name, uint64_t seq) { return std::make_shared<Work>(Work::Token{}, op_name, seq); }
  // A Work of a type derived from it, made with `args` after the Work's own (DeviceWork).
  template <class Op, class... Args>
  static std::shared_ptr<Op> make_derived(const char* op_name, uint64_t seq, Args&&... args) {
    return std::make_shared<Op>(Work::Token{}, op_name, seq, std::forward<Args>(args)...);
  }
  static void set_seq(Work& w, uint64_t seq) { w.seq_ = seq; }  // before anyone else sees it
  // Set once, by a device operation's Work as it is made.
  static void set_device(Work& w, DeviceCompletion* device) { w.device_ = device; }
  // A Work with room for its task (engine::Operation, executor.hpp), from `pool` (one consumer
  // at a time: the group's issue lock).
  template <class Op>
  static std::shared_ptr<Op> make_in_pool(const std::shared_ptr<WorkPool>& pool, const char* op_name, uint64_t seq) {
    return std::allocate_shared<Op>(WorkPoolAllocator<Op>(pool), Work::Token{}, op_name, seq);
  }
  // A Work (or a type derived from it) built in `where`, which the caller owns (spare_works.hpp).
  template <class Op>
  static Op* construct(void* where, const char* op_name, uint64_t seq) {
    return ::new (where) Op(Work::Token{}, op_name, seq);
  }
  static void finish(Work& w, std::exception_ptr error) { w.finish(std::move(error)); }
  // finish(nullptr) for a Work that no other thread can reach yet: its issuing call has not
  // returned it, and the engine never saw it (the direct path). Nobody can wait on it or have
  // asked for a callback, so its state is stored, not exchanged: a locked instruction here
  // would wait for the message just sent to leave this core (docs/PERFORMANCE.md).
  static void finish_unshared(Work& w) {
    w.state_.store(w.state_.load(std::memory_order_relaxed) | Work::kFinishing | Work::kDone | Work::kReleased,
                   std::memory_order_release);
  }
  // Whether `w`, whose last reference is the caller's (use_count() 1, seen before this call and
  // followed by an acquire fence), may become a new operation's Work: it succeeded, and nobody
  // waits on it or asked for a callback.
  static bool renewable(const Work& w) {
    return w.state_.load(std::memory_order_relaxed) == (Work::kFinishing | Work::kDone | Work::kReleased) && !w.error_ &&
           w.runner_.expired();
  }
  // A renewable Work as a newly made one for operation `seq` named `op_name`.
  static void renew(Work& w, const char* op_name, uint64_t seq) {
    w.op_name_ = op_name;
    w.seq_ = seq;
    w.ticket_ = 0;
    w.source_rank_.store(-1, std::memory_order_relaxed);
    w.state_.store(0, std::memory_order_relaxed);
  }
  // `ticket` lets the runner find the operation in its queue without searching it.
  static void set_runner(Work& w, std::weak_ptr<WorkRunner> runner, uint64_t ticket) {
    w.runner_ = std::move(runner);
    w.ticket_ = ticket;
  }
  static uint64_t ticket(const Work& w) { return w.ticket_; }
  // The static name issue() gave it (coll_name of its kind), without building a std::string.
  static const char* name(const Work& w) { return w.op_name_; }
  // finish() has run to its end (callbacks included): a waiter may return.
  static bool released(const Work& w) { return (w.state_.load(std::memory_order_acquire) & Work::kReleased) != 0; }
  static void set_source_rank(Work& w, int rank) { w.source_rank_.store(rank, std::memory_order_release); }
};

}  // namespace kolo::engine

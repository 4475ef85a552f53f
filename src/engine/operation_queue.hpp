// The executor's queue: operations issued and not yet taken by whoever runs them (the caller at
// issue, its waiter, the engine thread: executor.hpp), in issue order, each numbered with a
// ticket; and the two counters that say whether every collective queued so far has completed
// (issue order for a collective that would complete at once). It holds no policy: who takes
// what, and when, is the executor's. Everything here is under the executor's queue lock, except
// what says otherwise.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/ring_queue.hpp"
#include "engine/task.hpp"
#include "engine/work_access.hpp"

namespace kolo::engine {

class OperationQueue {
 public:
  void reserve(size_t n) { items_.reserve(n); }
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  Task& front() const { return *items_.front(); }
  Task& operator[](size_t i) const { return *items_[i]; }

  // Numbers `t` and appends it. A collective counts as unfinished until collective_finished().
  void push_back(Task& t) {
    number(t);
    items_.push_back(&t);
    publish_size();
  }
  // Numbers a collective that runs at once without the queue (the direct path): whoever issues
  // meanwhile is queued behind it, and it counts as unfinished like a queued one.
  void number(Task& t) {
    t.ticket = next_ticket_++;
    if (t.type == Task::Type::collective) ++collectives_queued_;
  }
  // Puts a numbered task back before the front (the direct path handing over: nothing left the
  // queue meanwhile, since taking from it needs the run lock, which the direct run held).
  void push_front(Task& t) {
    items_.push_front(&t);
    publish_size();
  }
  Task& pop_front() {
    Task& t = *items_.front();
    items_.pop_front();
    publish_size();
    return t;
  }
  // The index of the task of `w`, or SIZE_MAX when it is not queued. Tasks leave only from the
  // front, so the index is its ticket's distance from the front's: no search.
  size_t find(const Work& w) const {
    if (items_.empty()) return SIZE_MAX;
    const uint64_t front = items_.front()->ticket, t = WorkAccess::ticket(w);
    if (t < front || t - front >= items_.size()) return SIZE_MAX;
    const size_t k = static_cast<size_t>(t - front);
    return items_[k]->work.get() == &w ? k : SIZE_MAX;
  }
  // Everything queued from index `from` on is a point-to-point receive (or nothing is): what a
  // send may overtake. Bounded (false for a long queue, which is the engine's to work through).
  bool only_receives_from(size_t from) const {
    constexpr size_t kLook = 16;
    if (items_.size() > from + kLook) return false;
    for (size_t i = from; i < items_.size(); ++i)
      if (items_[i]->type != Task::Type::point_to_point || items_[i]->args.kind != algo::CollKind::recv) return false;
    return true;
  }

  // Every collective numbered so far has completed (its callbacks have run). Collectives run
  // one at a time in ticket order, so two counters say it.
  bool collectives_done() const { return collectives_done_.load(std::memory_order_acquire) == collectives_queued_; }
  // Whoever ran a collective, under the executor's run lock (one writer at a time: a plain store).
  void collective_finished() {
    collectives_done_.store(collectives_done_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // The close: appended once, after which nothing more is queued.
  bool closing() const { return closing_; }
  void close(Task& close_task) {
    closing_ = true;
    close_task.type = Task::Type::close;
    push_back(close_task);
  }

  // size(), readable without the lock (a thread deciding whether to look).
  int size_unlocked(std::memory_order order = std::memory_order_acquire) const { return size_.load(order); }

 private:
  // Written under the lock only: a plain store, no read-modify-write.
  void publish_size() { size_.store(static_cast<int>(items_.size()), std::memory_order_release); }

  RingQueue<Task*> items_;
  uint64_t next_ticket_ = 0;
  uint64_t collectives_queued_ = 0;
  std::atomic<uint64_t> collectives_done_{0};
  std::atomic<int> size_{0};
  bool closing_ = false;
};

}  // namespace kolo::engine

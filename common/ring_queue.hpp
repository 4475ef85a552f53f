// A FIFO over one growing array, for queues on the path of every collective (the executor's
// issued operations, a pair's posted sends and receives). std::deque allocates a block whenever
// the back crosses into a new one and frees it when the front leaves it, so a queue holding one
// or two entries at a time paid an allocation every few calls; this one allocates only when it
// holds more than ever before. Its capacity is a power of two (8, doubled as it grows), so an
// index wraps with a mask: a division by the capacity cost 10-40 cycles on every push and pop.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace kolo {

template <class T>
class RingQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  T& operator[](size_t i) { return slots_[wrap(head_ + i)]; }
  const T& operator[](size_t i) const { return slots_[wrap(head_ + i)]; }

  void push_back(T&& v) {
    if (size_ == slots_.size()) grow();
    slots_[wrap(head_ + size_)] = std::move(v);
    ++size_;
  }
  // Puts `v` before the front (a task that was running elsewhere and goes back into the queue).
  void push_front(T&& v) {
    if (size_ == slots_.size()) grow();
    head_ = wrap(head_ + slots_.size() - 1);
    slots_[head_] = std::move(v);
    ++size_;
  }
  void clear() {
    while (size_ > 0) pop_front();
  }
  // Room for `n` entries from the start: a queue that only the slow path uses (an operation
  // handed to the engine) must not allocate the first time that path is taken.
  void reserve(size_t n) {
    while (slots_.size() < n) grow();
  }
  // Resets the front's slot (releasing what it holds) and drops it.
  void pop_front() {
    slots_[head_] = T{};
    pop_moved_front();
  }
  // Drops a front that the caller has moved out: its slot keeps the moved-from T (which holds
  // nothing) until a later push overwrites it. Saves building and assigning an empty T, which
  // for the executor's 184-byte task was a `rep stos` and a store stall on every collective.
  void pop_moved_front() {
    head_ = wrap(head_ + 1);
    --size_;
  }

 private:
  size_t wrap(size_t i) const { return i & (slots_.size() - 1); }
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 8 : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0, size_ = 0;
};

}  // namespace kolo

// A mutex and a wake-up word built on Linux futexes, for the engine's issue and run paths.
//
// Why not std::mutex: an uncontended lock and unlock of glibc's mutex cost ~55 instructions
// (type and owner bookkeeping) around the one atomic operation each needs, and a small
// synchronous collective took three of them. FutexLock is the classic three-state lock (free,
// held, held with sleepers): one compare-exchange to take it, one exchange to give it back, a
// system call only when a thread sleeps on it. It spins briefly before sleeping: the holder of
// an issue or run lock keeps it for microseconds.
//
// WakeWord replaces a condition variable for a single sleeper (the engine thread): a counter
// that wakers bump and then wake; the sleeper reads it, looks at the state it cares about, and
// sleeps only while the counter still holds what it read (the kernel compares before sleeping),
// so a wake-up between its look and its sleep is never lost.
//
// Both are plain atomics to ThreadSanitizer (acquire on taking, release on giving back), which
// is all the ordering the data they guard needs.
#pragma once
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

#include "common/cpu_relax.hpp"

namespace kolo {

namespace futex_detail {
inline uint32_t* word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }
// Sleeps while *a == expected, at most `rel` (null: no bound). Returns on a wake, a change, a
// timeout or a signal alike: callers look again.
inline void wait(std::atomic<uint32_t>& a, uint32_t expected, const timespec* rel) {
  syscall(SYS_futex, word(a), FUTEX_WAIT_PRIVATE, expected, rel, nullptr, 0);
}
inline void wake(std::atomic<uint32_t>& a, int n) { syscall(SYS_futex, word(a), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0); }
}  // namespace futex_detail

class FutexLock {
 public:
  FutexLock() = default;
  FutexLock(const FutexLock&) = delete;
  FutexLock& operator=(const FutexLock&) = delete;

  void lock() {
    uint32_t c = kFree;
    if (!s_.compare_exchange_strong(c, kHeld, std::memory_order_acquire, std::memory_order_relaxed)) lock_slow();
  }
  bool try_lock() {
    uint32_t c = kFree;
    return s_.compare_exchange_strong(c, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() {
    if (s_.exchange(kFree, std::memory_order_release) == kSleepers) futex_detail::wake(s_, 1);
  }

 private:
  static constexpr uint32_t kFree = 0, kHeld = 1, kSleepers = 2;
  void lock_slow() {
    for (int i = 0; i < 128; ++i) {
      cpu_relax();
      uint32_t c = kFree;
      if (s_.load(std::memory_order_relaxed) == kFree &&
          s_.compare_exchange_strong(c, kHeld, std::memory_order_acquire, std::memory_order_relaxed))
        return;
    }
    // Mark the lock as having sleepers and sleep until it is free; whoever takes it this way
    // leaves the mark (it cannot know whether other sleepers remain), costing at most one
    // needless wake-up at its unlock.
    while (s_.exchange(kSleepers, std::memory_order_acquire) != kFree) futex_detail::wait(s_, kSleepers, nullptr);
  }
  std::atomic<uint32_t> s_{kFree};
};

class WakeWord {
 public:
  uint32_t read() const { return gen_.load(std::memory_order_seq_cst); }
  // Wakers: change the state the sleeper looks at first, then bump. The system call is made only
  // when the sleeper is (or is about to be) asleep: the bump is a full barrier and the sleeper
  // announces itself before the kernel compares the word, so one of the two sees the other.
  void bump_and_wake() {
    gen_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) futex_detail::wake(gen_, INT_MAX);
  }
  // Sleeps until the word differs from `seen` or `until` passes (or spuriously): look again.
  void sleep(uint32_t seen, std::chrono::steady_clock::time_point until) {
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec rel{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    sleeping_.fetch_add(1, std::memory_order_seq_cst);
    futex_detail::wait(gen_, seen, &rel);
    sleeping_.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint32_t> gen_{0};
  std::atomic<uint32_t> sleeping_{0};
};

}  // namespace kolo

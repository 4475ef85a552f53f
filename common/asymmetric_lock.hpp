// A mutex whose release is a plain store, for the engine's run lock.
//
// FutexLock gives itself back with an exchange, which tells it whether a thread sleeps on the
// lock. A locked instruction right after a message was published in shared memory waits for the
// message's cache lines to leave this core (~100 ns here, half a small collective:
// docs/PERFORMANCE.md), and the run lock is given back right after the direct path's last send.
// Here the release is a store and a look at a count of sleepers; a thread about to sleep counts
// itself and then plays both halves of the store-load fence (thread_fence.hpp), so that either
// the releaser's look sees it or its own look at the lock sees the release. Taking the lock is
// still a compare-exchange (before the sends: nothing to wait for there).
//
// Where membarrier(2) is missing the release is an exchange again (FutexLock's cost). A sleeper
// waits at most 50 ms before it looks again, so even a wake-up lost to a process that could
// not register (a fork()ed child) costs time, never a hang.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>

#include "common/cpu_relax.hpp"
#include "common/futex_lock.hpp"
#include "common/thread_fence.hpp"

namespace kolo {

class AsymmetricLock {
  static constexpr long kSleepBoundNs = 50'000'000;

 public:
  AsymmetricLock() : AsymmetricLock(true) {}
  // Light (plain-store release) only if `light` and this process can play the sleeper's half;
  // false: the exchange, on both sides (tests run both).
  // `sleep_bound`: how long a sleeper waits before it looks again by itself (tests make it long,
  // so that a lost wake-up shows).
  explicit AsymmetricLock(bool light, long sleep_bound_ns = kSleepBoundNs)
      : light_(light && asymmetric_thread_fences()), sleep_bound_ns_(sleep_bound_ns) {}
  AsymmetricLock(const AsymmetricLock&) = delete;
  AsymmetricLock& operator=(const AsymmetricLock&) = delete;

  bool try_lock() {
    uint32_t c = kFree;
    return s_.compare_exchange_strong(c, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void lock() {
    if (!try_lock()) lock_slow();
  }
  void unlock() {
    if (light_) {
      s_.store(kFree, std::memory_order_release);
      light_thread_fence(true);
    } else {
      s_.exchange(kFree, std::memory_order_seq_cst);
    }
    if (sleepers_.load(std::memory_order_relaxed) != 0) futex_detail::wake(s_, 1);
  }
  // Whether unlock() is a plain store (for tests).
  bool light() const { return light_; }

 private:
  static constexpr uint32_t kFree = 0, kHeld = 1;
  void lock_slow() {
    for (int i = 0; i < 128; ++i) {
      cpu_relax();
      if (s_.load(std::memory_order_relaxed) == kFree && try_lock()) return;
    }
    // Counted before the look that decides to sleep, and the count is published to the holder
    // by the heavy fence: the holder's release either comes before it (the look below sees the
    // lock free, or the kernel finds it changed and does not sleep) or its look at the count
    // comes after it (and it wakes us). One fence is enough for the whole wait: any later
    // holder took the lock with a compare-exchange after our count was in memory.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (light_) heavy_thread_fence();
    const timespec bound{static_cast<time_t>(sleep_bound_ns_ / 1'000'000'000), sleep_bound_ns_ % 1'000'000'000};
    while (!try_lock()) futex_detail::wait(s_, kHeld, &bound);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

  std::atomic<uint32_t> s_{kFree};
  std::atomic<uint32_t> sleepers_{0};
  const bool light_;
  const long sleep_bound_ns_ = kSleepBoundNs;
};

}  // namespace kolo

// The engine's run lock (common/asymmetric_lock.hpp) is given back by a plain store, and a
// thread about to sleep on it plays both halves of the store-load fence. A lost wake-up would
// leave the sleeper asleep until its bound, which these tests set to 3 s: they time every
// acquisition and fail on any that took 1.5 s or more, where each holder keeps the lock for
// microseconds (or 5 ms).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/asymmetric_lock.hpp"
#include "common/thread_fence.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr long kBoundNs = 3'000'000'000;                    // a sleeper's own look-again time
constexpr auto kLost = std::chrono::milliseconds(1500);   // a wait this long means a lost wake-up

// Threads take the lock in turns, holding it long enough (a busy few microseconds, sometimes a
// sleep) that the others spin out and sleep on it. Counts what the lock guards without atomics,
// so a lock that let two in would lose increments; returns the longest wait for the lock.
std::chrono::microseconds contend(kolo::AsymmetricLock& lock, int threads, int rounds, long* counter) {
  std::atomic<long> longest_us{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        const auto t0 = Clock::now();
        lock.lock();
        const long waited = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
        long seen = longest_us.load();
        while (waited > seen && !longest_us.compare_exchange_weak(seen, waited)) {
        }
        const long before = *counter;
        if ((i + t) % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        const auto until = Clock::now() + std::chrono::microseconds(3);
        while (Clock::now() < until) {
        }
        *counter = before + 1;
        lock.unlock();
      }
    });
  for (auto& th : ts) th.join();
  return std::chrono::microseconds(longest_us.load());
}

}  // namespace

class AsymmetricLockSides : public ::testing::TestWithParam<bool> {};

TEST_P(AsymmetricLockSides, ExcludesAndNeverLosesAWakeUp) {
  kolo::AsymmetricLock lock(GetParam(), kBoundNs);
  EXPECT_EQ(lock.light(), GetParam() && kolo::asymmetric_thread_fences());
  long counter = 0;
  const auto longest = contend(lock, 4, 2000, &counter);
  EXPECT_EQ(counter, 4 * 2000) << "two threads held the lock at once";
  EXPECT_LT(longest, kLost) << "a sleeper was not woken at the release (it waited for its bound)";
}

INSTANTIATE_TEST_SUITE_P(LightAndFenced, AsymmetricLockSides, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? std::string("light") : std::string("fenced"); });

TEST(AsymmetricLock, TryLockFailsWhileHeldAndSucceedsAfter) {
  kolo::AsymmetricLock lock;
  ASSERT_TRUE(lock.try_lock());
  std::thread other([&] { EXPECT_FALSE(lock.try_lock()); });
  other.join();
  lock.unlock();
  std::thread again([&] {
    EXPECT_TRUE(lock.try_lock());
    lock.unlock();
  });
  again.join();
}

TEST(AsymmetricLock, ASleeperIsWokenByTheRelease) {
  // One holder, one thread that must sleep (the holder keeps the lock 5 ms, far past the spin):
  // it must get the lock soon after the release, not at its bound.
  kolo::AsymmetricLock lock(true, kBoundNs);
  for (int round = 0; round < 10; ++round) {
    lock.lock();
    std::atomic<bool> started{false};
    Clock::time_point got;
    std::thread sleeper([&] {
      started = true;
      lock.lock();
      got = Clock::now();
      lock.unlock();
    });
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const auto released = Clock::now();
    lock.unlock();
    sleeper.join();
    EXPECT_LT(got - released, kLost) << "round " << round << ": the wake-up was lost";
  }
}


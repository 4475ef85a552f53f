// Work's completion without a lock (work.cpp): finish() takes no lock unless a callback was
// registered or a waiter sleeps. These tests race the three sides (finish, on_complete, wait)
// many times: a lost wake-up makes a wait time out, a lost or doubled callback shows in the
// counts. Threads, no ranks: a Work is made and finished directly (engine/work_access.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/work_access.hpp"
#include "kolo/error.hpp"

using namespace kolo;
using engine::WorkAccess;
using namespace std::chrono_literals;

TEST(WorkCompletion, ErrorIsDeliveredToWaitAndQueries) {
  WorkPtr w = WorkAccess::make("allreduce", 7);
  EXPECT_FALSE(w->is_completed());
  EXPECT_FALSE(w->is_success());
  EXPECT_EQ(w->exception(), nullptr);
  WorkAccess::finish(*w, std::make_exception_ptr(PeerError("kolo: boom", 3)));
  EXPECT_TRUE(w->is_completed());
  EXPECT_FALSE(w->is_success());
  EXPECT_NE(w->exception(), nullptr);
  EXPECT_THROW(w->wait(1s), PeerError);
  WorkAccess::finish(*w, nullptr);  // a second finish changes nothing
  EXPECT_THROW(w->wait(1s), PeerError);
}

TEST(WorkCompletion, ShortWaitTimesOutWhileRunning) {
  WorkPtr w = WorkAccess::make("broadcast", 1);
  EXPECT_THROW(w->wait(20ms), TimeoutError);
  WorkAccess::finish(*w, nullptr);
  EXPECT_NO_THROW(w->wait(20ms));
  EXPECT_TRUE(w->is_success());
}

TEST(WorkCompletion, CallbackRacingFinishRunsExactlyOnce) {
  constexpr int kRounds = 3000;
  int wrong = 0;
  for (int i = 0; i < kRounds; ++i) {
    WorkPtr w = WorkAccess::make("allreduce", static_cast<uint64_t>(i));
    std::atomic<int> runs{0};
    std::atomic<bool> go{false};
    std::thread reg([&] {
      while (!go.load()) {
      }
      w->on_complete([&](Work&) { runs.fetch_add(1); });
    });
    std::thread fin([&] {
      while (!go.load()) {
      }
      WorkAccess::finish(*w, nullptr);
    });
    go.store(true);
    reg.join();
    fin.join();
    if (runs.load() != 1) ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "callbacks lost or run twice in " << wrong << " of " << kRounds << " races";
}

TEST(WorkCompletion, CallbackRegisteredBeforeCompletionHasRunWhenWaitReturns) {
  constexpr int kRounds = 2000;
  int early = 0;
  for (int i = 0; i < kRounds; ++i) {
    WorkPtr w = WorkAccess::make("allreduce", static_cast<uint64_t>(i));
    std::atomic<bool> ran{false};
    w->on_complete([&](Work&) {
      std::this_thread::yield();  // widen the window between the callback and the release
      ran.store(true);
    });
    std::thread fin([&] { WorkAccess::finish(*w, nullptr); });
    w->wait(10s);
    if (!ran.load()) ++early;
    fin.join();
  }
  EXPECT_EQ(early, 0) << "wait() returned before a registered callback had run";
}

TEST(WorkCompletion, SleepingWaitersAreWokenEveryTime) {
  // Waiters that got past their yields and sleep on the condition variable: a finish that
  // missed them leaves them asleep until their own timeout (whose last look at the flag then
  // succeeds), so a lost wake-up shows as a wait that ends long after the finish.
  using Clock = std::chrono::steady_clock;
  constexpr int kRounds = 120, kWaiters = 3;
  std::atomic<int> late{0};
  for (int i = 0; i < kRounds; ++i) {
    WorkPtr w = WorkAccess::make("barrier", static_cast<uint64_t>(i));
    std::atomic<int64_t> finished_at{0};
    std::vector<std::thread> waiters;
    for (int k = 0; k < kWaiters; ++k)
      waiters.emplace_back([&] {
        w->wait(3s);
        const int64_t now = Clock::now().time_since_epoch().count();
        if (now - finished_at.load() > std::chrono::duration_cast<Clock::duration>(500ms).count()) late.fetch_add(1);
      });
    // Vary the moment: at once (waiters still yielding or not started), a little later, and
    // long after they went to sleep on the condition variable.
    if (i % 3 == 1) std::this_thread::sleep_for(std::chrono::microseconds(50 * (i % 7)));
    if (i % 3 == 2) std::this_thread::sleep_for(3ms);
    finished_at.store(Clock::now().time_since_epoch().count());
    WorkAccess::finish(*w, nullptr);
    for (auto& t : waiters) t.join();
  }
  EXPECT_EQ(late.load(), 0) << "waiters woke more than 500 ms after the finish: lost wake-ups";
}

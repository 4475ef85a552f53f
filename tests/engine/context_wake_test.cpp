// Context::block's event count (src/engine/context.hpp): a wake-up counted between taking the
// key and blocking ends the block at once, one counted while blocked ends it promptly, and
// without any the block lasts its time. The executor relies on this to skip the wake-up
// system call when its engine thread is busy (Context::wake_sleeper).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/context.hpp"

namespace kolo::engine {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(ContextWake, AWakeCountedBeforeTheBlockIsNotLost) {
  Context ctx(0, 1);
  const uint64_t key = ctx.wake_key();
  ctx.wake_sleeper();  // nobody blocked yet: no system call, only the count
  const auto t = Clock::now();
  ctx.block(std::chrono::microseconds(2'000'000), key);
  EXPECT_LT(seconds_since(t), 1.0) << "block() slept through a wake-up counted after its key";
}

TEST(ContextWake, AWakeWhileBlockedEndsTheBlock) {
  Context ctx(0, 1);
  const uint64_t key = ctx.wake_key();
  std::thread waker([&] {
    std::this_thread::sleep_for(milliseconds(50));
    ctx.wake_sleeper();
  });
  const auto t = Clock::now();
  ctx.block(std::chrono::microseconds(5'000'000), key);
  const double took = seconds_since(t);
  waker.join();
  EXPECT_LT(took, 2.5) << "block() missed a wake_sleeper() that came while it slept";
}

TEST(ContextWake, WithoutAWakeTheBlockLastsItsTime) {
  Context ctx(0, 1);
  const uint64_t key = ctx.wake_key();
  const auto t = Clock::now();
  ctx.block(std::chrono::microseconds(100'000), key);
  EXPECT_GE(seconds_since(t), 0.05) << "block() returned early with nothing to wake it";
}

}  // namespace
}  // namespace kolo::engine

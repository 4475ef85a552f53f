// The flight recorder's timestamps (common/ticks.hpp): ticks turned into steady-clock
// nanoseconds must agree with the steady clock, in order and in scale.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/ticks.hpp"

namespace kolo {
namespace {

TEST(Ticks, ConvertToTheSteadyClock) {
  const TickScale scale;
  const int64_t before_ns = steady_ns();
  const uint64_t t = ticks_now();
  const int64_t after_ns = steady_ns();
  // Let time pass, so that a wrong rate (ticks taken for nanoseconds on a GHz counter) shows as
  // milliseconds of error.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int64_t at = scale.to_ns(t, scale.ns_per_tick());
  EXPECT_GE(at, before_ns - 200'000) << "a tick converted to a time before it was read";
  EXPECT_LE(at, after_ns + 200'000) << "a tick converted to a time after it was read";
  const uint64_t later = ticks_now();
  const int64_t later_ns = steady_ns();
  EXPECT_GT(later, t);
  EXPECT_NEAR(static_cast<double>(scale.to_ns(later, scale.ns_per_tick())), static_cast<double>(later_ns), 200'000.0);
  EXPECT_EQ(scale.to_ns(0, scale.ns_per_tick()), 0) << "0 means 'not yet' and must stay 0";
}

}  // namespace
}  // namespace kolo

// A cheap timestamp for diagnostics (the flight recorder's issue, start and finish marks): the
// CPU's time-stamp counter where the kernel keeps time with it itself (clocksource "tsc": the
// kernel has checked that it is invariant and agrees across cores), else the steady clock in
// nanoseconds. Reading the counter costs 13 ns on the development VM against 32 ns for
// steady_clock::now(), and a small collective used to read the clock three times.
// Ticks become steady-clock nanoseconds through a TickScale: two (ticks, steady) pairs taken
// apart in time, usually the recorder's creation and the moment of a dump.
#pragma once
#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace kolo {

namespace ticks_detail {
extern const bool kCounterIsClock;  // ticks.cpp: read once, when libkolo is loaded
}

inline int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline uint64_t ticks_now() {
#if defined(__x86_64__) || defined(__i386__)
  if (ticks_detail::kCounterIsClock) return __rdtsc();
#endif
  return static_cast<uint64_t>(steady_ns());
}

// Converts ticks to steady-clock nanoseconds, from a reference pair taken earlier.
class TickScale {
 public:
  TickScale() : ticks0_(ticks_now()), ns0_(steady_ns()) {}
  // Nanoseconds per tick, calibrated against now. Take it once for times that are compared
  // with each other: two calibrations a moment apart can put one tick count a nanosecond apart,
  // and a start and a finish written with the same count 1 us apart once rounded.
  double ns_per_tick() const {
    const uint64_t ticks1 = ticks_now();
    const int64_t ns1 = steady_ns();
    // Too short an interval to calibrate on (a dump within microseconds of the start): the
    // counter's nominal rate hardly matters then, times are all within that interval.
    if (ticks1 > ticks0_ + 1000) return static_cast<double>(ns1 - ns0_) / static_cast<double>(ticks1 - ticks0_);
    return 1.0;
  }
  // Steady-clock nanoseconds of `t` (0 stays 0: "not yet") at the rate `ns_per_tick()` gave.
  int64_t to_ns(uint64_t t, double rate) const {
    if (t == 0) return 0;
    return ns0_ + static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(t - ticks0_)) * rate);
  }

 private:
  uint64_t ticks0_;
  int64_t ns0_;
};

}  // namespace kolo

#include "common/ticks.hpp"

#include <fstream>
#include <string>

namespace kolo::ticks_detail {

// The kernel uses the time-stamp counter as its clock only if it found it invariant and
// synchronised across CPUs; then so can we.
static bool counter_is_clock() {
#if defined(__x86_64__) || defined(__i386__)
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  return f >> name && name == "tsc";
#else
  return false;
#endif
}

const bool kCounterIsClock = counter_is_clock();

}  // namespace kolo::ticks_detail

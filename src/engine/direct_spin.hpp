// How the direct path (Executor::run_direct) waits for something a peer will provide (a
// message, room in a ring): it polls, reading the clock only every 64 polls (every poll when it
// yields), for at most
// KOLO_DIRECT_SPIN_US, and then hands the collective over to the engine instead of blocking the
// issuing thread. Where cores are scarce (WaitPolicy with no pure spin) it yields between polls.
#pragma once
#include <chrono>
#include <thread>

#include "common/cpu_relax.hpp"
#include "engine/context.hpp"

namespace kolo::engine {

class DirectSpin {
 public:
  DirectSpin(const Context& ctx, std::chrono::microseconds window, bool yield) : ctx_(ctx), window_(window), yield_(yield) {}
  // Call after a poll that found nothing: false once the window has passed or the group failed.
  bool again() {
    // A yield is a system call (and often a switch to another process): next to it a clock
    // read is free, and 64 yields could take a whole scheduler slice.
    if (yield_ || ++polls_ % 64 == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (until_ == std::chrono::steady_clock::time_point{}) until_ = now + window_;
      if (now >= until_ || ctx_.has_failure()) return false;
    }
    if (yield_)
      std::this_thread::yield();  // the peer may be waiting for this core
    else
      cpu_relax();
    return true;
  }

 private:
  const Context& ctx_;
  std::chrono::microseconds window_;
  bool yield_;
  unsigned polls_ = 0;
  std::chrono::steady_clock::time_point until_{};
};

}  // namespace kolo::engine

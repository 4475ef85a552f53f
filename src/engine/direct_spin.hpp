// How the direct path (Executor::run_direct) waits for something a peer will provide (a
// message, room in a ring): for at most KOLO_DIRECT_SPIN_US, and then it hands the collective
// over to the engine instead of blocking the issuing thread. Like the engine's own waits
// (EngineComm::wait, WaitPolicy) it polls without a system call only WaitPolicy::pure_spin_polls
// times (64: a few microseconds, reading the clock every 64 polls), and then yields between
// polls: a peer that is not running at all, because the scheduler put it on this very core
// (two ranks and their engine threads on two cores do meet there), gets the core at once. Pure
// spinning through the whole window there cost three windows per collective, ~60 us at 2 ranks
// here for 0.3 us collectives, and the two ranks stayed in step that way for hundreds of calls
// (docs/PERFORMANCE.md). Where cores are scarce (no pure spin) it yields from the first poll.
#pragma once
#include <chrono>
#include <thread>

#include "common/cpu_relax.hpp"
#include "engine/context.hpp"

namespace kolo::engine {

class DirectSpin {
 public:
  DirectSpin(const Context& ctx, std::chrono::microseconds window, int pure_spin_polls)
      : ctx_(ctx), window_(window), pure_polls_(pure_spin_polls > 0 ? static_cast<unsigned>(pure_spin_polls) : 0) {}
  // Call after a poll that found nothing: false once the window has passed or the group failed.
  bool again() {
    const bool pure = ++polls_ <= pure_polls_;
    // A yield is a system call (and often a switch to another process): next to it a clock
    // read is free, and 64 yields could take a whole scheduler slice.
    if (!pure || polls_ % 64 == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (until_ == std::chrono::steady_clock::time_point{}) until_ = now + window_;
      if (now >= until_ || ctx_.has_failure()) return false;
    }
    if (pure)
      cpu_relax();
    else
      std::this_thread::yield();  // the peer may be waiting for this core
    return true;
  }

 private:
  const Context& ctx_;
  std::chrono::microseconds window_;
  unsigned pure_polls_;
  unsigned polls_ = 0;
  std::chrono::steady_clock::time_point until_{};
};

}  // namespace kolo::engine

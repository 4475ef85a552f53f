// How the direct path (Executor::run_direct) waits for something a peer will provide (a
// message, room in a ring): for at most KOLO_DIRECT_SPIN_US, and then it hands the collective
// over to the engine instead of blocking the issuing thread. It polls without a system call
// (reading the clock every 64 polls) for the first quarter of that window, and then yields
// between polls: a peer that is not running at all, because the scheduler put it on this very
// core (unbound ranks and their engine threads on two cores do meet there), gets the core.
// Pure spinning through the whole window there cost three windows per collective, ~60 us at 2
// ranks here for 0.3 us collectives, for hundreds of calls in a row; yielding after 64 polls
// (~3 us) brought that to 6 us but cost 10-20% where a peer is a few microseconds late, as
// back-to-back callers' peers are (docs/PERFORMANCE.md). Where cores are scarce (WaitPolicy
// with no pure spin) it yields from the first poll.
#pragma once
#include <chrono>
#include <thread>

#include "common/cpu_relax.hpp"
#include "engine/context.hpp"

namespace kolo::engine {

class DirectSpin {
 public:
  // `pure_spin`: WaitPolicy::pure_spin_polls > 0 (cores to spare: spin before yielding).
  DirectSpin(const Context& ctx, std::chrono::microseconds window, bool pure_spin)
      : ctx_(ctx), window_(window), pure_(pure_spin) {}
  // Call after a poll that found nothing: false once the window has passed or the group failed.
  bool again() {
    // A yield is a system call (and often a switch to another process): next to it a clock
    // read is free, and 64 yields could take a whole scheduler slice.
    if (!pure_ || ++polls_ % 64 == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (until_ == std::chrono::steady_clock::time_point{}) {
        until_ = now + window_;
        pure_until_ = now + window_ / 4;
      }
      if (now >= until_ || ctx_.has_failure()) return false;
      if (now >= pure_until_) pure_ = false;
    }
    if (pure_)
      cpu_relax();
    else
      std::this_thread::yield();  // the peer may be waiting for this core
    return true;
  }

 private:
  const Context& ctx_;
  std::chrono::microseconds window_;
  bool pure_;
  unsigned polls_ = 0;
  std::chrono::steady_clock::time_point until_{}, pure_until_{};
};

}  // namespace kolo::engine

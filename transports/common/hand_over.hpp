// The loop a transport's Device::hand_over runs once it has begun resynchronising each kept pair
// (shm and tcp: a marker each way, the peer's old bytes dropped up to its marker): step every
// pair, wait on their sockets, until each is done or the deadline passes. Every marker goes out
// while we read, so two ranks whose buffers are full of each other's old bytes drain them for
// each other.
#pragma once
#include <poll.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "kolo/error.hpp"

namespace kolo::transport {

// Moving: {pair (resync_step() -> bool done, fd(), resync_writing()), int old_peer, int peer,
// bool done}. `what` names the transport in messages; `rank` is this rank in the new group.
// `check_peers`, called every 100 ms while a peer has not answered, throws when another rank
// gave up on the new group (its hand-over or connect failed elsewhere: it sends no marker, and
// waiting for one until the deadline would report the symptom, not the cause).
template <class Moving>
void drive_hand_over(std::vector<Moving>& moving, const char* what, int rank,
                     std::chrono::steady_clock::time_point deadline, const std::function<void()>& check_peers) {
  auto next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  auto who = [](const Moving& m) {
    return "rank " + std::to_string(m.peer) + " (rank " + std::to_string(m.old_peer) + " of the group it leaves)";
  };
  for (;;) {
    std::vector<pollfd> fds;
    const Moving* late = nullptr;
    for (auto& m : moving) {
      if (m.done) continue;
      try {
        m.done = m.pair->resync_step();
      } catch (const Error& e) {
        throw PeerError(std::string(what) + ": handing over the connection to " + who(m) + " failed: " + e.what(), m.peer);
      }
      if (m.done) continue;
      if (!late) late = &m;
      fds.push_back(pollfd{m.pair->fd(), static_cast<short>(POLLIN | (m.pair->resync_writing() ? POLLOUT : 0)), 0});
    }
    if (fds.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    if (check_peers && now >= next_check) {
      check_peers();
      next_check = now + std::chrono::milliseconds(100);
    }
    if (now >= deadline)
      throw TimeoutError(std::string(what) + ": " + who(*late) + " did not answer the hand-over of its connection to rank " +
                             std::to_string(rank) + " before the timeout",
                         late->peer);
    ::poll(fds.data(), fds.size(), 10);
  }
}

}  // namespace kolo::transport

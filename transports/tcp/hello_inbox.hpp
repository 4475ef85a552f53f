// The accepting side of setup: many half-open connections at once, none able to stall the rest.
//
// A caller that connects and then says nothing (or trickles bytes) must cost the group nothing:
// every accepted connection reads its hello without blocking, under its own deadline, while the
// listener keeps accepting. Completed hellos come out one at a time; whatever is garbage, slow or
// over the cap of pending connections is dropped with a reason the device logs.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "transports/tcp/socket.hpp"
#include "transports/tcp/wire.hpp"

namespace kolo::tcp {

class HelloInbox {
 public:
  // Pending connections beyond this are refused at once (oldest first): memory stays bounded.
  static constexpr size_t kMaxPending = 128;
  static constexpr std::chrono::seconds kHelloTimeout{10};

  struct Arrival {
    Fd fd;
    std::string from;  // remote address
    Hello hello;
  };
  struct Dropped {
    std::string from;
    std::string why;
  };

  explicit HelloInbox(int listen_fd) : listen_fd_(listen_fd) {}
  // A lazy device (tcp_device.cpp) sleeps in its epoll set, not in next(): with `epoll_fd`, every
  // pending connection is watched there (edge-triggered, data.u32 = `tag`) so that its bytes wake
  // the device, and is taken out again when its hello comes out of next().
  HelloInbox(int listen_fd, int epoll_fd, uint32_t tag) : listen_fd_(listen_fd), epoll_fd_(epoll_fd), tag_(tag) {}

  // Waits until `until` for a complete hello; true with *out filled when one arrived. Connections
  // given up on meanwhile are appended to *dropped.
  bool next(Clock::time_point until, Arrival* out, std::vector<Dropped>* dropped);

 private:
  struct Pending {
    Fd fd;
    std::string from;
    Hello hello{};
    size_t got = 0;
    Clock::time_point deadline;
  };
  void accept_ready(std::vector<Dropped>* dropped);
  // Reads what `p` has; true when its hello is complete. Throws kolo::Error on EOF or error.
  static bool read_some(Pending& p);

  int listen_fd_;
  int epoll_fd_ = -1;
  uint32_t tag_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace kolo::tcp

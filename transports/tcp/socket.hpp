// Small POSIX socket helpers shared by the TCP transport's setup path. All of them are bounded
// by a deadline; none is used on the data path.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "transports/common/fd.hpp"
#include "transports/common/setup_text.hpp"

namespace kolo::tcp {

using Clock = std::chrono::steady_clock;

using transport::errno_text;  // transports/common/setup_text.hpp

using transport::Fd;  // transports/common/fd.hpp

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};
Endpoint parse_endpoint(const std::string& s);  // "host:port"

// Listens on addr:0 (a free port) with a large backlog; returns the fd and fills the endpoint.
Fd listen_any_port(const std::string& addr, Endpoint* bound);
// Connects, retrying refused connections until the deadline (the peer may not listen yet).
Fd connect_until(const Endpoint& ep, Clock::time_point deadline);
// Starts a non-blocking connect and returns at once (the lazy dialer, dial.cpp, finishes it in
// its device's poll). An invalid Fd with *err set when the connect failed at once.
Fd start_connect(const Endpoint& ep, int* err);
// Accepts one connection or throws TimeoutError at the deadline. Fills the peer's address.
Fd accept_until(int listen_fd, Clock::time_point deadline, std::string* peer_addr);

// Blocking-style exact I/O on a non-blocking socket, bounded by the deadline.
void write_all_until(int fd, const void* buf, size_t n, Clock::time_point deadline);
void read_all_until(int fd, void* buf, size_t n, Clock::time_point deadline);

void set_nonblocking(int fd);
// TCP_NODELAY (never wait on a delayed-ACK / Nagle timer) and buffer sizes (0: kernel default).
void tune_data_socket(int fd, int buffer_bytes);

}  // namespace kolo::tcp

// The TCPStore server: one thread runs an epoll loop over non-blocking sockets and serves every
// client in c10d's protocol (either dialect, told per connection: see tcp_store_wire.hpp). A WAIT
// for missing keys is parked (no polling by anyone) and answered as soon as a request creates the
// keys, or cancelled by the client's CANCEL_WAIT or its disconnect.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace kolo::store_detail {

class TcpStoreServerCore {
 public:
  // Listens on host:port (port 0 = ephemeral) and starts the serving thread. Throws kolo::Error.
  static std::unique_ptr<TcpStoreServerCore> start(const std::string& host, uint16_t port);
  ~TcpStoreServerCore();  // stops the thread and closes every connection

  uint16_t port() const;
  // Observability (and what the tests use to prove waiters are parked, not polling).
  uint64_t requests_handled() const;
  uint64_t parked_requests() const;
  uint64_t open_connections() const;
  uint64_t dropped_connections() const;  // ended for garbage

  struct Loop;

 private:
  explicit TcpStoreServerCore(std::unique_ptr<Loop> loop);
  std::unique_ptr<Loop> loop_;
};

}  // namespace kolo::store_detail

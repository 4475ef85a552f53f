// The TCPStore server: one thread runs an epoll loop over non-blocking sockets and serves every
// client in c10d's protocol (either dialect, told per connection: see tcp_store_wire.hpp). A WAIT
// for missing keys is parked (no polling by anyone) and answered as soon as a request creates the
// keys, or cancelled by the client's CANCEL_WAIT or its disconnect.
//
// With a key, every connection must first pass kolo's store authentication (store_auth.hpp);
// until it has, the server reads only the handshake's bytes from it, serves nothing, and drops it
// (logging its address and why) on the first wrong byte, after kAuthDeadline, or when more than
// kMaxPendingAuth connections are pending (the oldest goes), while everyone else is served.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "store/store_auth.hpp"

namespace kolo {
class TlsContext;
}

namespace kolo::store_detail {

class TcpStoreServerCore {
 public:
  // Listens on host:port (port 0 = ephemeral) and starts the serving thread. Throws kolo::Error.
  // With `key`, only clients that prove it are served.
  // How long a connection may take to authenticate, and how many may be at it at once: bounds
  // on what silent or slow unauthenticated connections hold (a real client needs one round trip).
  static constexpr std::chrono::milliseconds kAuthDeadline{10000};
  static constexpr size_t kMaxPendingAuth = 128;

  // auth_deadline: kAuthDeadline but in tests. With `tls` (KOLO_TLS=1: TlsContext::for_store),
  // every connection starts with a TLS handshake, and one that fails it (a c10d client in clear,
  // another job's key or CA, TLS 1.2) is refused and logged with its address.
  static std::unique_ptr<TcpStoreServerCore> start(const std::string& host, uint16_t port,
                                                   std::optional<auth::Key> key = std::nullopt,
                                                   std::chrono::milliseconds auth_deadline = kAuthDeadline,
                                                   std::shared_ptr<const TlsContext> tls = nullptr);
  ~TcpStoreServerCore();  // stops the thread and closes every connection

  uint16_t port() const;
  // Observability (and what the tests use to prove waiters are parked, not polling).
  uint64_t requests_handled() const;
  uint64_t parked_requests() const;
  uint64_t open_connections() const;
  uint64_t dropped_connections() const;  // ended for garbage
  uint64_t refused_connections() const;  // ended for failing authentication (also counted as dropped)
  uint64_t pending_authentications() const;

  struct Loop;

 private:
  explicit TcpStoreServerCore(std::unique_ptr<Loop> loop);
  std::unique_ptr<Loop> loop_;
};

}  // namespace kolo::store_detail

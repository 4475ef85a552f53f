// Small POSIX socket helpers for the TCPStore server and client. All sockets are non-blocking
// and close-on-exec; the client's blocking calls are built from poll() with a deadline.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "store/store_common.hpp"

namespace kolo {
class TlsSession;
}

namespace kolo::store_detail {

std::string errno_text(int err);

// A socket listening on host:port (port 0 = ephemeral) with SO_REUSEADDR. Throws kolo::Error.
int listen_on(const std::string& host, uint16_t port);

// The port a bound socket actually got.
uint16_t local_port(int fd);

// Connects to host:port, retrying refused/unreachable attempts with growing pauses until
// `timeout` passes (the server may start after its clients). Sets TCP_NODELAY. Throws
// TimeoutError "TCPStore: could not connect to HOST:PORT within N ms: <last error>".
int connect_with_retry(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);

enum class IoStatus { kOk, kTimeout, kClosed, kError };
struct IoResult {
  IoStatus status = IoStatus::kOk;
  int err = 0;  // errno for kError
};

// Sends / receives exactly `size` bytes on a non-blocking socket, waiting with poll() until
// `deadline`. With `tls` (KOLO_TLS=1, common/tls.hpp), through its records; a TLS failure
// (a tampered record, a cut one) is kError with err EPROTO, and tls->error() says what.
IoResult send_all(int fd, const uint8_t* data, size_t size, Clock::time_point deadline, TlsSession* tls = nullptr);
IoResult recv_exact(int fd, uint8_t* data, size_t size, Clock::time_point deadline, TlsSession* tls = nullptr);

}  // namespace kolo::store_detail

#include "store/store_socket.hpp"

#include <sys/uio.h>

#include "common/tls.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "kolo/error.hpp"

namespace kolo::store_detail {
namespace {

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head) ::freeaddrinfo(head);
  }
};

// getaddrinfo() for a TCP endpoint; returns the gai error code (0 on success).
int resolve(const std::string& host, uint16_t port, bool passive, AddrInfoList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  std::string service = std::to_string(port);
  return ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.head);
}

bool is_self_connection(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;
  return local_len == peer_len && std::memcmp(&local, &peer, local_len) == 0;
}

// One non-blocking connect attempt to `ai`, waiting at most until `deadline`. Returns the socket
// or -1 with *err set.
int try_connect(const addrinfo* ai, Clock::time_point deadline, int* err) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
    *err = errno;
    ::close(fd);
    return -1;
  }
  // Connected at once or in progress: either way POLLOUT says when it has settled.
  pollfd pfd{fd, POLLOUT, 0};
  int ready = 0;
  do {
    ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(remaining(deadline).count(), 1 << 30)));
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) {
    *err = ready == 0 ? ETIMEDOUT : errno;
    ::close(fd);
    return -1;
  }
  int so_error = 0;
  socklen_t len = sizeof(so_error);
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
  if (so_error != 0) {
    *err = so_error;
    ::close(fd);
    return -1;
  }
  if (is_self_connection(fd)) {
    // Retrying a local port nobody listens on can make the kernel pick that very port as our
    // source and "connect" the socket to itself; that is no server.
    *err = ECONNREFUSED;
    ::close(fd);
    return -1;
  }
  return fd;
}

// Waits for `events` on fd until the deadline; false on timeout. Errors surface in the next I/O call.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    int ms = static_cast<int>(std::min<int64_t>(remaining(deadline).count(), 1 << 30));
    int ready = ::poll(&pfd, 1, ms);
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return true;
  }
}

}  // namespace

std::string errno_text(int err) { return std::strerror(err); }

int listen_on(const std::string& host, uint16_t port) {
  AddrInfoList addrs;
  if (int rc = resolve(host, port, true, addrs); rc != 0) {
    throw Error("TCPStore: cannot resolve listen address " + host + ":" + std::to_string(port) + ": " +
                ::gai_strerror(rc));
  }
  int last_err = 0;
  for (addrinfo* ai = addrs.head; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) return fd;
    last_err = errno;
    ::close(fd);
  }
  throw Error("TCPStore: cannot listen on " + host + ":" + std::to_string(port) + ": " + errno_text(last_err));
}

uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw Error("TCPStore: getsockname failed: " + errno_text(errno));
  }
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

int connect_with_retry(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = deadline_after(timeout);
  auto pause = std::chrono::milliseconds(10);
  std::string last_error = "no attempt finished";
  for (;;) {
    AddrInfoList addrs;
    if (int rc = resolve(host, port, false, addrs); rc != 0) {
      // The name may not resolve yet (e.g. a DNS entry for a starting node); keep trying.
      last_error = ::gai_strerror(rc);
    } else {
      for (addrinfo* ai = addrs.head; ai; ai = ai->ai_next) {
        int err = 0;
        int fd = try_connect(ai, deadline, &err);
        if (fd >= 0) {
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          return fd;
        }
        last_error = errno_text(err);
      }
    }
    auto left = remaining(deadline);
    if (left.count() == 0) break;
    std::this_thread::sleep_for(std::min(pause, left));
    pause = std::min(pause * 2, std::chrono::milliseconds(250));
  }
  throw TimeoutError("TCPStore: could not connect to " + host + ":" + std::to_string(port) + " within " +
                     std::to_string(timeout.count()) + " ms: " + last_error);
}

IoResult send_all(int fd, const uint8_t* data, size_t size, Clock::time_point deadline, TlsSession* tls) {
  size_t sent = 0;
  while (sent < size) {
    iovec iov{const_cast<uint8_t*>(data) + sent, size - sent};
    ssize_t n = tls ? tls->writev(&iov, 1) : ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLOUT, deadline)) return {IoStatus::kTimeout, 0};
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return {IoStatus::kClosed, errno};
    return {IoStatus::kError, errno};
  }
  return {};
}

IoResult recv_exact(int fd, uint8_t* data, size_t size, Clock::time_point deadline, TlsSession* tls) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = tls ? tls->read(data + got, size - got) : ::recv(fd, data + got, size - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return {IoStatus::kClosed, 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, deadline)) return {IoStatus::kTimeout, 0};
      continue;
    }
    if (errno == ECONNRESET) return {IoStatus::kClosed, errno};
    return {IoStatus::kError, errno};
  }
  return {};
}

}  // namespace kolo::store_detail

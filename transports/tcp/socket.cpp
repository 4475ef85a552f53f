#include "transports/tcp/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "kolo/error.hpp"

namespace kolo::tcp {

Endpoint parse_endpoint(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) throw InvalidArgument("bad endpoint '" + s + "': expected host:port");
  Endpoint ep;
  ep.host = s.substr(0, colon);
  ep.port = static_cast<uint16_t>(std::stoi(s.substr(colon + 1)));
  return ep;
}

static int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left > 1000000 ? 1000000 : left);
}

static sockaddr_in resolve_ipv4(const std::string& host, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) throw Error("cannot resolve host '" + host + "': " + gai_strerror(rc));
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return sa;
}

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw Error("fcntl(O_NONBLOCK): " + errno_text(errno));
}

void tune_data_socket(int fd, int buffer_bytes) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (buffer_bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  }
}

Fd listen_any_port(const std::string& addr, Endpoint* bound) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw Error("socket(): " + errno_text(errno));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = resolve_ipv4(addr, 0);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    throw Error("bind(" + addr + ":0): " + errno_text(errno));
  if (::listen(fd.get(), 1024) != 0) throw Error("listen(): " + errno_text(errno));
  socklen_t len = sizeof sa;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  bound->host = addr;
  bound->port = ntohs(sa.sin_port);
  set_nonblocking(fd.get());
  return fd;
}

Fd connect_until(const Endpoint& ep, Clock::time_point deadline) {
  sockaddr_in sa = resolve_ipv4(ep.host, ep.port);
  int last_err = 0;
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw Error("socket(): " + errno_text(errno));
    set_nonblocking(fd.get());
    int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      int pr = ::poll(&p, 1, remaining_ms(deadline));
      if (pr == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) return fd;
    last_err = errno;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
  throw TimeoutError("could not connect to " + ep.str() + " before the timeout: " + errno_text(last_err));
}

Fd start_connect(const Endpoint& ep, int* err) {
  sockaddr_in sa = resolve_ipv4(ep.host, ep.port);
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) throw Error("socket(): " + errno_text(errno));
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) {
    *err = errno;
    return Fd();
  }
  *err = 0;
  return fd;
}

Fd accept_until(int listen_fd, Clock::time_point deadline, std::string* peer_addr) {
  for (;;) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      char ip[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
      if (peer_addr) *peer_addr = std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
      return Fd(fd);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      throw Error("accept(): " + errno_text(errno));
    int ms = remaining_ms(deadline);
    if (ms == 0) throw TimeoutError("timed out waiting for peers to connect");
    pollfd p{listen_fd, POLLIN, 0};
    ::poll(&p, 1, ms);
  }
}

void write_all_until(int fd, const void* buf, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) throw Error("send(): " + errno_text(errno));
    int ms = remaining_ms(deadline);
    if (ms == 0) throw TimeoutError("timed out sending");
    pollfd pf{fd, POLLOUT, 0};
    ::poll(&pf, 1, ms);
  }
}

void read_all_until(int fd, void* buf, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw Error("connection closed by the peer");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) throw Error("recv(): " + errno_text(errno));
    int ms = remaining_ms(deadline);
    if (ms == 0) throw TimeoutError("timed out receiving");
    pollfd pf{fd, POLLIN, 0};
    ::poll(&pf, 1, ms);
  }
}

}  // namespace kolo::tcp

#include "transports/common/seqpacket.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <thread>

#include "kolo/error.hpp"
#include "transports/common/setup_text.hpp"

namespace kolo::transport::seqpacket {

namespace {

socklen_t abstract_address(const char* who, const std::string& name, sockaddr_un* sa) {
  std::memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof sa->sun_path) throw Error(std::string(who) + ": socket name too long: " + name);
  // sun_path[0] == '\0': the abstract namespace, which vanishes with the last socket.
  std::memcpy(sa->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

Fd new_socket(const char* who) {
  Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw Error(std::string(who) + ": socket(AF_UNIX, SOCK_SEQPACKET): " + errno_text(errno));
  return fd;
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000000));
}

void wait_ready(const char* who, int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd pf{fd, events, 0};
    int ms = remaining_ms(deadline);
    int n = ::poll(&pf, 1, ms);
    if (n > 0) return;
    if (n < 0 && errno != EINTR) throw Error(std::string(who) + ": poll: " + errno_text(errno));
    if (n == 0 && ms == 0) throw TimeoutError(std::string(who) + ": timed out " + what);
  }
}

}  // namespace

Fd listen_abstract(const char* who, const std::string& name) {
  Fd fd = new_socket(who);
  sockaddr_un sa;
  socklen_t len = abstract_address(who, name, &sa);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    if (errno == EADDRINUSE) return Fd();
    throw Error(std::string(who) + ": bind(@" + name + "): " + errno_text(errno));
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) throw Error(std::string(who) + ": listen(@" + name + "): " + errno_text(errno));
  return fd;
}

Fd connect_abstract_until(const char* who, const std::string& name, Clock::time_point deadline) {
  sockaddr_un sa;
  socklen_t len = abstract_address(who, name, &sa);
  for (;;) {
    Fd fd = new_socket(who);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) == 0) return fd;
    int e = errno;
    // A full backlog answers EAGAIN on a non-blocking unix socket: the peer has not accepted yet.
    if (e != EAGAIN && e != EINTR)
      throw Error(std::string(who) + ": connect(@" + name + "): " + errno_text(e) +
                  (e == ECONNREFUSED || e == ENOENT ? " (is the peer in another network namespace, or gone?)" : ""));
    if (Clock::now() >= deadline) throw TimeoutError(std::string(who) + ": timed out connecting to @" + name);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Fd accept_until(const char* who, int listen_fd, Clock::time_point deadline) {
  for (;;) {
    Fd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.valid()) return fd;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      throw Error(std::string(who) + ": accept: " + errno_text(errno));
    wait_ready(who, listen_fd, POLLIN, deadline, "waiting for a peer to connect");
  }
}

void send_record_until(const char* who, int fd, const void* rec, size_t bytes, Clock::time_point deadline) {
  for (;;) {
    ssize_t w = ::send(fd, rec, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w == static_cast<ssize_t>(bytes)) return;
    if (w >= 0) throw Error(std::string(who) + ": short send on the control socket");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      throw Error(std::string(who) + ": send on the control socket: " + errno_text(errno));
    wait_ready(who, fd, POLLOUT, deadline, "sending on the control socket");
  }
}

size_t recv_record_until(const char* who, int fd, void* rec, size_t capacity, Clock::time_point deadline) {
  for (;;) {
    ssize_t r = ::recv(fd, rec, capacity, MSG_DONTWAIT);
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0) throw Error(std::string(who) + ": the peer closed the control socket during setup");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      throw Error(std::string(who) + ": recv on the control socket: " + errno_text(errno));
    wait_ready(who, fd, POLLIN, deadline, "waiting for the peer's handshake");
  }
}

pid_t peer_pid(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return cred.pid;
}

}  // namespace kolo::transport::seqpacket

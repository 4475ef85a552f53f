#include "transports/tcp/hello_inbox.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "kolo/error.hpp"

namespace kolo::tcp {

void HelloInbox::accept_ready(std::vector<Dropped>* dropped) {
  for (;;) {
    std::string from;
    Fd fd;
    try {
      fd = accept_until(listen_fd_, Clock::now(), &from);  // deadline now: whatever is queued, no wait
    } catch (const TimeoutError&) {
      return;
    }
    if (pending_.size() >= kMaxPending) {
      dropped->push_back({pending_.front().from, "too many connections waiting to say hello"});
      pending_.erase(pending_.begin());
    }
    if (epoll_fd_ >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
      ev.data.u32 = tag_;
      (void)epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd.get(), &ev);  // unwatched, it is still read on the next pass
    }
    Pending p;
    p.fd = std::move(fd);
    p.from = std::move(from);
    p.deadline = Clock::now() + kHelloTimeout;
    pending_.push_back(std::move(p));
  }
}

bool HelloInbox::read_some(Pending& p) {
  auto* dst = reinterpret_cast<char*>(&p.hello);
  while (p.got < sizeof p.hello) {
    ssize_t n = ::recv(p.fd.get(), dst + p.got, sizeof p.hello - p.got, 0);
    if (n > 0) {
      p.got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) throw Error("connection closed after " + std::to_string(p.got) + " of " + std::to_string(sizeof p.hello) + " bytes");
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    if (errno == EINTR) continue;
    throw Error("recv(): " + errno_text(errno));
  }
  return true;
}

bool HelloInbox::next(Clock::time_point until, Arrival* out, std::vector<Dropped>* dropped) {
  for (;;) {
    accept_ready(dropped);
    const auto now = Clock::now();
    for (size_t i = 0; i < pending_.size();) {
      Pending& p = pending_[i];
      bool complete = false;
      std::string why;
      try {
        complete = read_some(p);
      } catch (const Error& e) {
        why = std::string("no valid handshake: ") + e.what();
      }
      if (why.empty() && !complete && now >= p.deadline) why = "no valid handshake: said nothing for " +
                                                               std::to_string(kHelloTimeout.count()) + " s";
      if (!why.empty()) {
        dropped->push_back({p.from, why});
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (complete) {
        if (epoll_fd_ >= 0) (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p.fd.get(), nullptr);
        out->fd = std::move(p.fd);
        out->from = std::move(p.from);
        out->hello = p.hello;
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        return true;
      }
      ++i;
    }
    if (now >= until) return false;
    // Sleep until the listener or any pending connection has something, a pending deadline
    // passes, or `until`.
    auto wake = until;
    for (const auto& p : pending_) wake = std::min(wake, p.deadline);
    std::vector<pollfd> fds;
    fds.reserve(pending_.size() + 1);
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& p : pending_) fds.push_back({p.fd.get(), POLLIN, 0});
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(ms, 0, 1000)));
  }
}

}  // namespace kolo::tcp

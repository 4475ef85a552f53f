#include "transports/tcp/dial.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "transports/tcp/handshake.hpp"

namespace kolo::tcp {

using transport::Failure;

Dial::Result Dial::fail(Failure why, const std::string& text) {
  state_ = State::done;
  failure_ = why;
  error_ = text;
  fd_.reset();
  return Result::failed;
}

Dial::Result Dial::step() {
  switch (state_) {
    case State::lookup: return look_up();
    case State::connecting: return finish_connect();
    case State::replying: return read_reply();
    case State::done: break;
  }
  return failure_ == Failure::none ? Result::connected : Result::failed;
}

Dial::Result Dial::look_up() {
  const auto now = Clock::now();
  if (now < next_lookup_) return Result::busy;
  const std::string key = b_.prefix + "/tcp/" + std::to_string(peer_);
  std::string info;
  try {
    // check() does not wait: a peer that has not made its device yet (or never will) must not
    // hold this thread; the collective's deadline bounds how long we keep asking.
    if (!b_.store->check({key})) {
      next_lookup_ = now + backoff_;
      backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(100));
      return Result::busy;
    }
    info = b_.store->get_string(key);
  } catch (const std::exception& e) {
    return fail(Failure::io_error, "cannot look up rank " + std::to_string(peer_) + "'s address in the store: " + e.what());
  }
  const auto hash = info.rfind('#');
  if (hash == std::string::npos || !transport::auth::from_hex(info.substr(hash + 1), &peer_nonce_))
    return fail(Failure::io_error, "tcp transport: malformed store entry " + key + " (mixed kolo versions?)");
  int err = 0;
  try {
    ep_ = parse_endpoint(info.substr(0, hash));
    fd_ = start_connect(ep_, &err);
  } catch (const std::exception& e) {
    return fail(Failure::io_error, "cannot connect to rank " + std::to_string(peer_) + ": " + e.what());
  }
  if (!fd_.valid()) return fail(Failure::peer_closed, "cannot connect to rank " + std::to_string(peer_) + " at " + ep_.str() + ": " +
                                                          errno_text(err) + " (has its process exited?)");
  state_ = State::connecting;
  return finish_connect();
}

Dial::Result Dial::finish_connect() {
  pollfd p{fd_.get(), POLLOUT, 0};
  if (::poll(&p, 1, 0) != 1) return Result::busy;
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  // The peer published its address only once it was listening, and listens until its group
  // closes: a refusal means its process is gone.
  if (err != 0)
    return fail(Failure::peer_closed, "cannot connect to rank " + std::to_string(peer_) + " at " + ep_.str() + ": " +
                                          errno_text(err) + " (has its process exited?)");
  try {
    // 96 bytes into a fresh socket's empty buffer: never waits.
    transport::Bootstrap now = b_;
    now.deadline = Clock::now() + std::chrono::seconds(10);
    challenge_ = send_hello(fd_.get(), now, peer_, peer_nonce_, tls_);
  } catch (const std::exception& e) {
    return fail(Failure::peer_closed, "rank " + std::to_string(peer_) + " closed the connection during the handshake: " + e.what());
  }
  state_ = State::replying;
  return read_reply();
}

Dial::Result Dial::read_reply() {
  auto* dst = reinterpret_cast<char*>(&reply_);
  // Exactly the reply: whatever follows it (the peer may send data frames at once) is the pair's.
  while (reply_got_ < sizeof reply_) {
    ssize_t n = ::recv(fd_.get(), dst + reply_got_, sizeof reply_ - reply_got_, MSG_DONTWAIT);
    if (n > 0) {
      reply_got_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Result::busy;
    return fail(Failure::peer_closed, "rank " + std::to_string(peer_) + " closed the connection during the handshake" +
                                          (n < 0 ? ": " + errno_text(errno) : std::string()));
  }
  if (reply_.magic == kHelloMagic && reply_.status == HelloStatus::crossed) {
    state_ = State::done;
    fd_.reset();
    return Result::crossed;
  }
  try {
    check_hello_reply(reply_, b_, peer_, challenge_, peer_nonce_);
  } catch (const std::exception& e) {
    return fail(Failure::io_error, e.what());
  }
  state_ = State::done;
  return Result::connected;
}

}  // namespace kolo::tcp

// One outgoing connection of a lazy TCP device (KOLO_CONNECT=lazy), opened when a pair is first
// used and advanced by the device's poll() without ever blocking on the peer:
//
//   lookup      the peer's "ip:port#nonce" in the store (published when its device was made;
//               asked again with a backoff while it is not there yet)
//   connecting  a non-blocking connect; writable means done
//   replying    our Hello is sent (the same challenge-response as eager setup, handshake.hpp);
//               the peer's HelloReply is read as it comes
//
// It ends connected (the fd goes to a TcpPair), crossed (the peer dialled us at the same moment
// and, being the lower rank, keeps its own connection: ours is dropped) or failed, with a
// message that names the peer.
#pragma once
#include <chrono>
#include <string>

#include "transports/tcp/socket.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"

namespace kolo::tcp {

class Dial {
 public:
  enum class Result { busy, connected, crossed, failed };

  // `b` must outlive the dial (the device's copy of its bootstrap).
  // `tls`: the hello says KOLO_TLS=1 (the TLS handshake itself is the pair's, tcp_pair.cpp).
  Dial(const transport::Bootstrap& b, int peer, bool tls = false) : b_(b), peer_(peer), tls_(tls) {}

  // Moves as far as it can without waiting; busy while it needs another call.
  Result step();
  // The socket once there is one (-1 while looking up): the device watches it so that a sleeping
  // poll wakes when the connect or the reply completes.
  int fd() const { return fd_.get(); }
  Fd take_fd() { return std::move(fd_); }
  int peer() const { return peer_; }
  // After failed: why, naming the peer, and how the engine should classify it.
  const std::string& error() const { return error_; }
  transport::Failure failure() const { return failure_; }

 private:
  enum class State { lookup, connecting, replying, done };
  Result fail(transport::Failure why, const std::string& text);
  Result look_up();
  Result finish_connect();
  Result read_reply();

  const transport::Bootstrap& b_;
  int peer_;
  bool tls_;
  State state_ = State::lookup;
  Clock::time_point next_lookup_{};
  std::chrono::milliseconds backoff_{1};
  Endpoint ep_;
  Fd fd_;
  transport::auth::Nonce peer_nonce_{};
  transport::auth::Nonce challenge_{};
  HelloReply reply_{};
  size_t reply_got_ = 0;
  std::string error_;
  transport::Failure failure_ = transport::Failure::none;
};

}  // namespace kolo::tcp

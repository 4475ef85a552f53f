// Connections on demand for the TCP device (KOLO_CONNECT=lazy): a rank connects only to the
// peers its algorithms talk to (ring neighbours, tree parent and children), so a group of 1,024
// ranks running rings holds a few sockets per rank instead of 1,023.
//
// At setup the device only listens and publishes "ip:port#nonce" under the group's prefix, as
// eager setup does. The first send to a peer (PendingPair) starts a Dial; hellos that arrive on
// the listener are read without blocking (HelloInbox) and answered after the same
// challenge-response as eager setup (handshake.hpp): every connection is authenticated.
//
// The sender dials: a receive cannot complete before its sender has sent, and the sender's send
// opens the connection, so a ring (send to r+1, receive from r-1) connects once per pair with no
// race. A receive dials too, but only after waiting kReceiveDialDelay for its sender's connection:
// a peer that died before connecting is then found out (its port refuses) instead of timed out.
//
// Both ranks may dial each other at the same moment. The connection dialled by the lower rank is
// the one kept, decided by each side alone:
//   - the lower rank, with a dial of its own under way (or already connected), answers the
//     higher rank's hello "crossed"; the higher rank then waits for the lower rank's connection,
//     which is on its way;
//   - the higher rank accepts the lower rank's hello even while its own dial is under way and
//     drops its own once that dial hears its answer ("crossed").
// The lower rank refuses only while it is dialling or connected, and once it has accepted the
// higher rank's hello it never dials: so exactly one connection survives, whatever the timing.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transports/tcp/dial.hpp"
#include "transports/tcp/hello_inbox.hpp"
#include "transports/tcp/pending_pair.hpp"
#include "transports/transport.hpp"

namespace kolo::tcp {

class TcpDevice;
class TcpPair;

class OnDemand {
 public:
  // epoll data.u32 of the listener and of connections that have not said hello yet.
  static constexpr uint32_t kInboxTag = 0xFFFFFFFEu;
  // epoll data.u32 of an outgoing connection being made: kDialTag | peer.
  static constexpr uint32_t kDialTag = 0x80000000u;

  // Listens, publishes this rank's address and nonce, and watches the listener in `epoll_fd`.
  OnDemand(TcpDevice* dev, const transport::Bootstrap& b, const std::vector<int>& peers, int epoll_fd);

  // The pair for a reachable peer not connected yet; null for one outside `peers`.
  transport::Pair* pair(int peer);
  // An epoll event with one of the tags above.
  void mark(uint32_t tag);
  // Reads hellos and advances dials; true if a request changed state (posts went out on a new
  // connection, or failed with it).
  bool progress() {
    if (!inbox_ready_ && active_.empty()) return false;
    return progress_slow();
  }
  // How long a receive waits for its sender's connection before dialling itself.
  static constexpr std::chrono::milliseconds kReceiveDialDelay{100};

  // First use of `peer` (PendingPair): a send dials unless a connection is made or on its way
  // (after taking any hello already waiting: the peer may be dialling us); a receive starts the
  // kReceiveDialDelay clock.
  void want(int peer, bool sending);
  // Fails what waits for a connection; connections made from now on carry the abort notice.
  void abort(const std::string& reason);
  // Connections made from now on say goodbye at once (the device is closing).
  void set_closing() { closing_ = true; }
  // After abort(): whether the notice may still reach a peer through a connection being made (a
  // dial under way, or a peer waiting for our answer): the device lingers a little for them.
  bool aborted() const { return abort_reason_.has_value(); }

 private:
  struct Attempt {
    std::unique_ptr<Dial> dial;
    bool watched = false;  // its socket is in the epoll set
  };
  struct Link {
    enum class State : uint8_t { unreachable, idle, dialing, awaiting_peer, connected, failed };
    State state = State::unreachable;
    Attempt mine;     // our dial while dialing
    Attempt dropped;  // our dial after the lower-ranked peer's connection won: kept until answered
    std::unique_ptr<PendingPair> pending;
    Clock::time_point dial_at{};  // idle with a receive waiting: dial at this time
  };

  bool progress_slow();
  void start_dial(int peer);
  bool accept_hellos();
  bool on_hello(HelloInbox::Arrival in);
  bool step(int peer, Attempt& a, bool is_mine);
  void watch(int peer, Attempt& a);
  // `dialled`: this side connected (the TLS client when KOLO_TLS=1).
  bool connected(int peer, Fd fd, bool dialled);
  bool failed(int peer, transport::Failure why, const std::string& detail);
  void refuse(const std::string& from, const std::string& why);

  TcpDevice* dev_;
  transport::Bootstrap b_;  // the dials read it: store, prefix, secret
  int epfd_;
  Fd listener_;
  transport::auth::Nonce nonce_{};
  std::vector<bool> reachable_;
  std::vector<Link> links_;
  std::vector<int> active_;  // peers with a dial to advance, or a receive waiting to dial
  std::unique_ptr<HelloInbox> inbox_;
  bool inbox_ready_ = true;  // read the listener on the first progress
  bool closing_ = false;
  std::optional<std::string> abort_reason_;
  int refused_ = 0;
};

}  // namespace kolo::tcp

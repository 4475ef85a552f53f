#include "transports/tcp/on_demand.hpp"

#include <sys/epoll.h>

#include <algorithm>

#include "common/log.hpp"
#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/tcp_device.hpp"

namespace kolo::tcp {

using transport::Failure;

namespace {
constexpr int kLoggedRefusals = 10;
}

OnDemand::OnDemand(TcpDevice* dev, const transport::Bootstrap& b, const std::vector<int>& peers, int epoll_fd)
    : dev_(dev), b_(b), epfd_(epoll_fd), reachable_(static_cast<size_t>(b.size), false), links_(static_cast<size_t>(b.size)) {
  for (int p : peers) {
    reachable_[static_cast<size_t>(p)] = true;
    Link& l = links_[static_cast<size_t>(p)];
    l.state = Link::State::idle;
    l.pending = std::make_unique<PendingPair>(this, p);
  }
  Endpoint self;
  listener_ = listen_any_port(b.listen_addr, &self);
  nonce_ = transport::auth::fresh_nonce();
  inbox_ = std::make_unique<HelloInbox>(listener_.get(), epfd_, kInboxTag);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u32 = kInboxTag;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, listener_.get(), &ev) != 0) throw Error("epoll_ctl: " + errno_text(errno));
  // Published last: a peer that finds the address finds us listening, so a refused connect
  // later means this process is gone.
  b_.store->set(b_.prefix + "/tcp/" + std::to_string(b_.rank), self.str() + "#" + transport::auth::to_hex(nonce_));
  KOLO_LOG(debug, "tcp: " << peers.size() << " peer(s) reachable on demand, listening on " << self.str());
}

transport::Pair* OnDemand::pair(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= links_.size()) return nullptr;
  return links_[static_cast<size_t>(peer)].pending.get();
}

void OnDemand::mark(uint32_t tag) {
  if (tag == kInboxTag) inbox_ready_ = true;
  // A dial's events need no flag: every active dial is advanced on every progress().
}

void OnDemand::want(int peer, bool sending) {
  Link& l = links_[static_cast<size_t>(peer)];
  if (l.state != Link::State::idle || abort_reason_) return;
  if (!sending) {
    if (l.dial_at == Clock::time_point{}) {
      l.dial_at = Clock::now() + kReceiveDialDelay;
      active_.push_back(peer);
    }
    return;
  }
  // The peer may be dialling us already (its hello waits unread): take its connection rather than
  // cross it with ours.
  accept_hellos();
  if (l.state == Link::State::idle) start_dial(peer);
}

void OnDemand::start_dial(int peer) {
  Link& l = links_[static_cast<size_t>(peer)];
  l.state = Link::State::dialing;
  l.mine.dial = std::make_unique<Dial>(b_, peer, dev_->tls());
  if (l.dial_at == Clock::time_point{}) active_.push_back(peer);
  // Start at once: the lookup and the connect leave now, the answer is read by later polls.
  step(peer, l.mine, true);
}

bool OnDemand::progress_slow() {
  bool moved = false;
  if (inbox_ready_) {
    inbox_ready_ = false;
    moved |= accept_hellos();
  }
  for (size_t i = 0; i < active_.size();) {
    const int peer = active_[i];
    Link& l = links_[static_cast<size_t>(peer)];
    if (l.state == Link::State::idle && l.dial_at != Clock::time_point{} && Clock::now() >= l.dial_at) start_dial(peer);
    if (l.mine.dial) moved |= step(peer, l.mine, true);
    if (l.dropped.dial) moved |= step(peer, l.dropped, false);
    const bool waits_to_dial = l.state == Link::State::idle && l.dial_at != Clock::time_point{};
    if (!l.mine.dial && !l.dropped.dial && !waits_to_dial) {
      l.dial_at = Clock::time_point{};
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
  return moved;
}

void OnDemand::watch(int peer, Attempt& a) {
  if (a.watched || a.dial->fd() < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u32 = kDialTag | static_cast<uint32_t>(peer);
  (void)epoll_ctl(epfd_, EPOLL_CTL_ADD, a.dial->fd(), &ev);  // unwatched, it is still advanced on every poll
  a.watched = true;
}

bool OnDemand::step(int peer, Attempt& a, bool is_mine) {
  const Dial::Result r = a.dial->step();
  if (r == Dial::Result::busy) {
    watch(peer, a);
    return false;
  }
  if (!is_mine) {
    // Our dial lost to the peer's connection: whatever it heard, it is dropped.
    if (r == Dial::Result::connected) KOLO_LOG(debug, "tcp: rank " << peer << " also accepted our connection; dropping it");
    a.dial.reset();
    return false;
  }
  Link& l = links_[static_cast<size_t>(peer)];
  if (r == Dial::Result::crossed) {
    // The lower rank is dialling us: its connection is on its way.
    KOLO_LOG(debug, "tcp: rank " << peer << " is connecting to us at the same time; waiting for its connection");
    a.dial.reset();
    l.state = Link::State::awaiting_peer;
    return false;
  }
  if (r == Dial::Result::failed) {
    const Failure why = a.dial->failure();
    const std::string text = a.dial->error();
    a.dial.reset();
    return failed(peer, why, text);
  }
  Fd fd = a.dial->take_fd();
  if (a.watched) (void)epoll_ctl(epfd_, EPOLL_CTL_DEL, fd.get(), nullptr);
  a.dial.reset();
  return connected(peer, std::move(fd), true);
}

bool OnDemand::connected(int peer, Fd fd, bool dialled) {
  Link& l = links_[static_cast<size_t>(peer)];
  l.state = Link::State::connected;
  // With TLS, its handshake runs in the pair's first reads and writes: nothing here waits.
  std::unique_ptr<TlsSession> tls = dev_->tls_session(fd.get(), peer, dialled);
  TcpPair* p = dev_->add_pair(peer, std::move(fd), std::move(tls));
  KOLO_LOG(debug, "tcp: connected to rank " << peer << " on demand");
  l.pending->flush_into(p);
  if (abort_reason_) {
    p->abort(*abort_reason_);
  } else if (closing_) {
    p->set_closing();
    p->queue_bye();
  }
  return true;
}

bool OnDemand::failed(int peer, Failure why, const std::string& detail) {
  Link& l = links_[static_cast<size_t>(peer)];
  l.state = Link::State::failed;
  l.pending->fail_all(why, detail);
  if (b_.failures) b_.failures->peer_failed(peer, why, detail);
  return true;
}

void OnDemand::refuse(const std::string& from, const std::string& why) {
  ++refused_;
  // As in eager setup: a flood of bad connections must not become a flood of log lines.
  if (refused_ <= kLoggedRefusals) KOLO_LOG(warn, "refused a connection from " << from << ": " << why);
  if (refused_ == kLoggedRefusals) KOLO_LOG(warn, "further refused connections are counted, not logged");
}

bool OnDemand::accept_hellos() {
  bool moved = false;
  std::vector<HelloInbox::Dropped> dropped;
  for (;;) {
    HelloInbox::Arrival in;
    const bool got = inbox_->next(Clock::now(), &in, &dropped);
    for (const auto& d : dropped) refuse(d.from, d.why);
    dropped.clear();
    if (!got) return moved;
    moved |= on_hello(std::move(in));
  }
}

bool OnDemand::on_hello(HelloInbox::Arrival in) {
  b_.deadline = Clock::now() + HelloInbox::kHelloTimeout;  // bounds the reply's write only
  HelloStatus st = verify_hello(in.hello, b_, reachable_, nonce_, dev_->tls());
  if (st != HelloStatus::ok) {
    reply_hello(in.fd.get(), in.hello, b_, st, nonce_);
    refuse(in.from, std::string(hello_status_text(st)) +
                        (in.hello.magic == kHelloMagic ? " (claims rank " + std::to_string(in.hello.src_rank) + ")" : ""));
    return false;
  }
  // Authenticated: rank `src` of this group. Which connection survives (see the header)?
  const int src = in.hello.src_rank;
  Link& l = links_[static_cast<size_t>(src)];
  const bool i_am_lower = b_.rank < src;
  switch (l.state) {
    case Link::State::dialing: st = i_am_lower ? HelloStatus::crossed : HelloStatus::ok; break;
    case Link::State::connected: st = i_am_lower ? HelloStatus::crossed : HelloStatus::bad_rank; break;
    case Link::State::failed:
    case Link::State::unreachable: st = HelloStatus::bad_rank; break;
    case Link::State::idle:
    case Link::State::awaiting_peer: st = HelloStatus::ok; break;
  }
  reply_hello(in.fd.get(), in.hello, b_, st, nonce_);
  if (st == HelloStatus::crossed) {
    KOLO_LOG(debug, "tcp: rank " << src << " connected while we were connecting to it; ours is kept");
    return false;
  }
  if (st != HelloStatus::ok) {
    refuse(in.from, std::string(hello_status_text(st)) + " (claims rank " + std::to_string(src) + ")");
    return false;
  }
  if (l.mine.dial) {
    // We are the higher rank and were dialling too: the peer's connection wins.
    l.dropped = std::move(l.mine);
    l.mine = Attempt{};
  }
  return connected(src, std::move(in.fd), false);
}

void OnDemand::abort(const std::string& reason) {
  abort_reason_ = reason;
  for (auto& l : links_) {
    if (l.state == Link::State::unreachable || l.state == Link::State::connected) continue;
    l.pending->fail_all(Failure::aborted, reason);
    // A dial under way goes on, and a peer that connects from now on is accepted as usual: either
    // connection then carries the abort notice at once (connected()), so that the peer names the
    // rank to blame instead of timing out, as it would over an eager mesh. A receive still
    // waiting to dial never will.
    l.dial_at = Clock::time_point{};
  }
}

}  // namespace kolo::tcp

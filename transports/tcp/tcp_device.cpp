#include "transports/tcp/tcp_device.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cstring>
#include <thread>

#include "common/log.hpp"
#include "common/config.hpp"
#include "kolo/error.hpp"
#include "transports/common/hand_over.hpp"
#include "kolo/store.hpp"
#include "kolo/version.hpp"
#include "transports/setup_failure.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/hello_inbox.hpp"

namespace kolo::tcp {

using transport::Bootstrap;
using transport::Failure;

TcpDevice::TcpDevice(int size, transport::FailureSink* sink) : pairs_(static_cast<size_t>(size)), sink_(sink) {
  epfd_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_.valid()) throw Error("epoll_create1: " + errno_text(errno));
}

TcpDevice::~TcpDevice() {
  // After a failure, linger briefly: drop what peers still send until they close, so our close
  // sends FIN rather than RST and they can read our abort notice (bounded: 1 s in all).
  // An abort leaves whole connections open for a hand-over (TcpPair::after_abort): close them
  // for writing now, so that the peers' lingers below end too.
  std::vector<TcpPair*> open;
  for (auto* p : live_)
    if (p->failed()) {
      p->shut_write();
      open.push_back(p);
    }
  // Lazily, a peer waiting on this rank may not be connected yet: its receive dials after
  // OnDemand::kReceiveDialDelay. Answer such dials for a while so that it hears the abort notice
  // (naming the rank to blame) rather than a refused connect that names this rank.
  const auto start = std::chrono::steady_clock::now();
  const bool answer_late_dials = on_demand_ && on_demand_->aborted();
  const auto late_until = start + 3 * OnDemand::kReceiveDialDelay;
  auto deadline = start + std::chrono::seconds(1);
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const bool late = answer_late_dials && now < late_until;
    if ((open.empty() && !late) || now >= deadline) break;
    if (late && on_demand_->progress()) {
      open.clear();
      for (auto* p : live_)
        if (p->failed()) open.push_back(p);
    }
    std::vector<pollfd> fds;
    for (auto* p : open) fds.push_back(pollfd{p->fd(), POLLIN, 0});
    fds.push_back(pollfd{epfd_.get(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), late ? 5 : 20);
    std::erase_if(open, [](TcpPair* p) { return p->linger_done(); });
    if (late) {
      // The epoll set's readiness is consumed here, or on_demand_ would never hear of new hellos.
      epoll_event evs[64];
      int n = epoll_wait(epfd_.get(), evs, 64, 0);
      for (int i = 0; i < n; ++i)
        if (evs[i].data.u32 >= pairs_.size()) on_demand_->mark(evs[i].data.u32);
      for (auto* p : live_) p->progress();
    }
  }
}

std::unique_ptr<TcpDevice> TcpDevice::adopt(int size, transport::FailureSink* sink, int peer, Fd fd) {
  std::unique_ptr<TcpDevice> dev(new TcpDevice(size, sink));
  dev->add_pair(peer, std::move(fd));
  return dev;
}

std::unique_ptr<TlsSession> TcpDevice::tls_session(int fd, int peer, bool dialled) const {
  if (!tls_) return nullptr;
  set_nonblocking(fd);
  return std::make_unique<TlsSession>(*tls_, fd, dialled, tls_peer_name("rank " + std::to_string(peer), fd));
}

TcpPair* TcpDevice::add_pair(int peer, Fd fd, std::unique_ptr<TlsSession> tls) {
  set_nonblocking(fd.get());
  tune_data_socket(fd.get(), static_cast<int>(config::get_int("KOLO_SOCKET_BUFFER_BYTES")));
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u32 = static_cast<uint32_t>(peer);
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) throw Error("epoll_ctl: " + errno_text(errno));
  pairs_[static_cast<size_t>(peer)] = std::make_unique<TcpPair>(sink_, peer, std::move(fd), std::move(tls));
  live_.push_back(pairs_[static_cast<size_t>(peer)].get());
  return live_.back();
}

// A rank whose setup fails says so in the store (setup_failure.hpp), so that peers waiting for
// its connection fail at once with its reason instead of waiting out the timeout.
std::unique_ptr<transport::Device> TcpDevice::connect(const Bootstrap& b, const std::vector<int>& peers) {
  return connect_device(b, peers);
}

std::unique_ptr<TcpDevice> TcpDevice::connect_device(const Bootstrap& b, const std::vector<int>& peers) {
  return connect_device(b, peers, TlsSettings::from_config());
}

std::unique_ptr<TcpDevice> TcpDevice::connect_device(const Bootstrap& b, const std::vector<int>& peers, const TlsSettings& tls) {
  try {
    return connect_or_throw(b, peers, tls);
  } catch (const std::exception& e) {
    transport::publish_setup_failure(b, e.what());
    throw;
  }
}

std::unique_ptr<TcpDevice> TcpDevice::connect_or_throw(const Bootstrap& b, const std::vector<int>& peers, const TlsSettings& tls) {
  std::unique_ptr<TcpDevice> dev(new TcpDevice(b.size, b.failures));
  if (tls.on) dev->tls_ = std::make_unique<TlsContext>(tls, b.secret);
  const bool with_tls = dev->tls();
  if (b.connect_lazily) {
    // Listen and publish now; connect each peer on its first use (on_demand.hpp).
    dev->on_demand_ = std::make_unique<OnDemand>(dev.get(), b, peers, dev->epfd_.get());
    return dev;
  }
  Endpoint self;
  Fd listener = listen_any_port(b.listen_addr, &self);
  // Our address and this setup's nonce, which every connector's proof must cover.
  const transport::auth::Nonce nonce = transport::auth::fresh_nonce();
  b.store->set(b.prefix + "/tcp/" + std::to_string(b.rank), self.str() + "#" + transport::auth::to_hex(nonce));

  // Lower ranks connect to higher ones. Connecting never waits for the peer to accept (the
  // kernel queues the connection), so every rank can connect first and accept afterwards.
  struct Outgoing {
    int peer;
    Fd fd;
    transport::auth::Nonce challenge;   // what our hello asked the peer to prove
    transport::auth::Nonce peer_nonce;  // what the peer published
  };
  std::vector<Outgoing> outgoing;
  int lower = 0;
  for (int peer : peers) {
    if (peer < b.rank) {
      ++lower;
      continue;
    }
    const std::string key = b.prefix + "/tcp/" + std::to_string(peer);
    const std::string info = b.store->get_string(key);
    const auto hash = info.rfind('#');
    transport::auth::Nonce peer_nonce{};
    if (hash == std::string::npos || !transport::auth::from_hex(info.substr(hash + 1), &peer_nonce))
      throw Error("tcp transport: malformed store entry " + key + " (mixed kolo versions?)");
    Endpoint ep = parse_endpoint(info.substr(0, hash));
    Fd fd = connect_until(ep, b.deadline);
    auto challenge = send_hello(fd.get(), b, peer, peer_nonce, with_tls);
    outgoing.push_back(Outgoing{peer, std::move(fd), challenge, peer_nonce});
  }
  std::vector<bool> want(static_cast<size_t>(b.size), false);
  for (int peer : peers)
    if (peer < b.rank) want[static_cast<size_t>(peer)] = true;
  int refused = 0;
  std::string last_refusal;
  constexpr int kLoggedRefusals = 10;
  HelloInbox inbox(listener.get());
  std::vector<HelloInbox::Dropped> dropped;
  auto refuse = [&](const std::string& from, const std::string& why) {
    ++refused;
    last_refusal = why + " (from " + from + ")";
    // A flood of bad connections must not become a flood of log lines: the first few are
    // logged, the rest counted (the total is logged once the group has formed).
    if (refused <= kLoggedRefusals) KOLO_LOG(warn, "refused a connection from " << from << ": " << why);
    if (refused == kLoggedRefusals) KOLO_LOG(warn, "further refused connections are counted, not logged");
  };
  while (lower > 0) {
    // Wake up now and then to see whether a peer gave up (and why).
    HelloInbox::Arrival in;
    const bool arrived = inbox.next(std::min(b.deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200)), &in, &dropped);
    for (const auto& d : dropped) refuse(d.from, d.why);
    dropped.clear();
    if (!arrived) {
      const std::string refusals = refused ? "; refused " + std::to_string(refused) + " connection(s): " + last_refusal : "";
      transport::throw_if_peer_gave_up(b, refusals);
      if (std::chrono::steady_clock::now() < b.deadline) continue;
      std::string missing;
      for (int p = 0; p < b.size; ++p)
        if (want[static_cast<size_t>(p)]) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      throw TimeoutError("rank " + std::to_string(b.rank) + " timed out waiting for connections from rank(s) " + missing +
                         refusals);
    }
    int peer = -1;
    std::string why;
    if (!answer_hello(in.fd.get(), in.hello, b, want, nonce, &peer, &why, with_tls)) {
      refuse(in.from, why);
      continue;
    }
    // KOLO_TLS=1: the TLS handshake too before the rank counts as connected, so that a caller
    // that knows the secret but fails TLS (wrong certificate, TLS 1.2) leaves the rank free for
    // the real one. It waits for the peer only once the peer reads our reply, which every rank
    // does after its accepting (lower ranks first): no cycle of waits.
    std::unique_ptr<TlsSession> session;
    if (with_tls) {
      try {
        session = dev->tls_session(in.fd.get(), peer, false);
        session->handshake_until(std::min(b.deadline, Clock::now() + HelloInbox::kHelloTimeout), peer);
      } catch (const std::exception& e) {
        refuse(in.from, e.what());
        continue;
      }
    }
    want[static_cast<size_t>(peer)] = false;
    --lower;
    dev->add_pair(peer, std::move(in.fd), std::move(session));
  }
  if (refused > kLoggedRefusals) KOLO_LOG(warn, "refused " << refused << " connection(s) in all while the group formed");
  for (auto& o : outgoing) {
    expect_hello_reply(o.fd.get(), b, o.peer, o.challenge, o.peer_nonce);
    std::unique_ptr<TlsSession> session = dev->tls_session(o.fd.get(), o.peer, true);
    if (session) session->handshake_until(b.deadline, o.peer);
    dev->add_pair(o.peer, std::move(o.fd), std::move(session));
  }
  KOLO_LOG(debug, "tcp: connected to " << peers.size() << " peer(s), listening on " << self.str());
  return dev;
}

transport::Pair* TcpDevice::pair(int peer) {
  if (TcpPair* p = tcp_pair(peer)) return p;
  return on_demand_ ? on_demand_->pair(peer) : nullptr;
}

TcpPair* TcpDevice::tcp_pair(int peer) const {
  if (peer < 0 || static_cast<size_t>(peer) >= pairs_.size()) return nullptr;
  return pairs_[static_cast<size_t>(peer)].get();
}

bool TcpDevice::poll() { return poll_pairs(false); }

bool TcpDevice::poll_pairs(bool ask_epoll) {
  // Reading a socket that a posted receive waits on costs one system call whether or not its
  // message has come; asking epoll_wait first added a second one to every message received. So
  // while at most kReadAtOnce pairs wait for input, they are read at once (a read that finds
  // nothing costs what the epoll_wait did), and epoll is asked only every kEpollEvery polls
  // (hang-ups and abort notices of the other pairs), when a send met a full socket buffer
  // (only epoll tells when it drains), while connections are made on demand, and before the
  // engine sleeps: its ready list must then be empty, or poll(2) on the epoll descriptor would
  // return at once for data already read. Edge-triggered, so a read ahead of the event is
  // harmless: the event, when epoll is asked, makes one more read, which finds nothing.
  constexpr unsigned kEpollEvery = 64;
  constexpr int kReadAtOnce = 2;
  int awaiting = 0;
  bool blocked_output = false;
  for (auto* p : live_) {
    awaiting += p->awaits_input() ? 1 : 0;
    blocked_output |= p->output_blocked();
  }
  const bool read_at_once = awaiting > 0 && awaiting <= kReadAtOnce;
  if (!read_at_once || ask_epoll || blocked_output || on_demand_ || ++polls_ % kEpollEvery == 0) ask_epoll = true;
  if (read_at_once)
    for (auto* p : live_)
      if (p->awaits_input()) p->expect_input();
  epoll_event evs[64];
  const int n = ask_epoll ? epoll_wait(epfd_.get(), evs, 64, 0) : 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t tag = evs[i].data.u32;
    uint32_t e = evs[i].events;
    if (tag < pairs_.size()) {
      if (TcpPair* p = pairs_[tag].get()) p->mark(e & EPOLLIN, e & EPOLLOUT, e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR));
    } else if (on_demand_) {
      on_demand_->mark(tag);
    }
  }
  // Connections made here flush the posts that waited for them; the loop below moves them.
  bool moved = on_demand_ ? on_demand_->progress() : false;
  for (auto* p : live_) moved |= p->progress();
  return moved;
}

void TcpDevice::abort(const std::string& reason) {
  for (auto* p : live_) p->abort(reason);
  if (on_demand_) on_demand_->abort(reason);
}

std::vector<int> TcpDevice::reusable_peers() const {
  // Lazily too: a connection made on demand is in live_ on both ends once its hello is done
  // (one still saying hello is offered by neither end, or by one only, and the engine keeps a
  // connection only if both offer it); the new group makes the others on demand again.
  std::vector<int> out;
  for (const TcpPair* p : live_)
    if (p->reusable()) out.push_back(p->peer());
  return out;
}

void TcpDevice::adopt_pair(std::unique_ptr<TcpPair> pair) {
  const int peer = pair->peer();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u32 = static_cast<uint32_t>(peer);
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, pair->fd(), &ev) != 0) throw Error("epoll_ctl: " + errno_text(errno));
  live_.push_back(pair.get());
  pairs_[static_cast<size_t>(peer)] = std::move(pair);
}

std::unique_ptr<transport::Device> TcpDevice::hand_over(const Handover& h) {
  std::unique_ptr<TcpDevice> dev(new TcpDevice(h.boot.size, h.boot.failures));
  const uint64_t token = transport::group_hash(h.boot.prefix);
  struct Moving {
    std::unique_ptr<TcpPair> pair;
    int old_peer, peer;
    bool done = false;
  };
  std::vector<Moving> moving;
  for (const auto& [old_peer, peer] : h.keep) {
    TcpPair* p = tcp_pair(old_peer);
    if (p == nullptr || !p->reusable() || peer < 0 || peer >= h.boot.size)
      throw Error("tcp transport: the connection to rank " + std::to_string(old_peer) + " cannot be handed over");
    // From here on the pair is the new group's: this device neither polls nor closes it.
    epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, p->fd(), nullptr);
    std::erase(live_, p);
    Moving m{std::move(pairs_[static_cast<size_t>(old_peer)]), old_peer, peer};
    transport::Tag mine, expect;
    mine.w[0] = expect.w[0] = token;
    mine.w[1] = static_cast<uint64_t>(h.boot.rank);
    expect.w[1] = static_cast<uint64_t>(peer);
    mine.w[2] = expect.w[2] = static_cast<uint64_t>(h.boot.size);
    m.pair->begin_resync(mine, expect);
    moving.push_back(std::move(m));
  }
  transport::drive_hand_over(moving, "tcp transport", h.boot.rank, h.boot.deadline,
                             [&] { transport::throw_if_peer_gave_up(h.boot, " (while handing connections over)"); });
  for (auto& m : moving) {
    m.pair->finish_resync(m.peer, h.boot.failures);
    dev->adopt_pair(std::move(m.pair));
  }
  KOLO_LOG(debug, "tcp: handed " << moving.size() << " connection(s) over to group " << h.boot.prefix);
  return dev;
}

std::vector<int> TcpDevice::close(std::chrono::steady_clock::time_point deadline) {
  for (auto* p : live_) {
    p->set_closing();
    p->queue_bye();
  }
  // Connections still being made are not waited for (nothing is pending on them once every
  // operation completed); one that completes meanwhile says goodbye at once.
  if (on_demand_) on_demand_->set_closing();
  std::vector<int> missing;
  for (;;) {
    poll();
    missing.clear();
    for (auto* p : live_)
      if (!p->failed() && !(p->bye_received() && p->sends_drained())) missing.push_back(p->peer());
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
    // Sleep on the epoll fd's own readiness: epoll_wait here would eat edge-triggered events.
    pollfd pf{epfd_.get(), POLLIN, 0};
    ::poll(&pf, 1, 10);
  }
  for (auto* p : live_) ::shutdown(p->fd(), SHUT_RDWR);
  return missing;
}

// The lowest priority: TCP reaches every peer, and carries what nothing faster reaches.
KOLO_REGISTER_TRANSPORT(tcp, {"tcp", 10, [](const transport::Bootstrap&, int) { return true; }, &TcpDevice::connect});

}  // namespace kolo::tcp

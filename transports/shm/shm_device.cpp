// ShmDevice at run time: progress, the sleep/wake protocol, abort and the orderly close.
// Setup (segments, sockets, handshakes) is in shm_connect.cpp.
#include "transports/shm/shm_device.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "common/config.hpp"
#include "kolo/error.hpp"
#include "transports/common/hand_over.hpp"
#include "transports/setup_failure.hpp"
#include "transports/shm/shm_fence.hpp"
#include "transports/common/setup_text.hpp"

namespace kolo::shm {

using transport::Failure;

namespace {
constexpr uint32_t kNudgeId = UINT32_MAX;
// The device looks at the sockets (abort notices, deaths) only every so many polls, and before
// every sleep: an epoll_wait per poll would put a system call on every message.
constexpr unsigned kPollsBetweenSocketChecks = 256;
}  // namespace

ShmDevice::ShmDevice(int size, transport::FailureSink* sink) : pairs_(static_cast<size_t>(size)), sink_(sink) {
  epfd_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_.valid()) throw Error("shm transport: epoll_create1: " + transport::errno_text(errno));
  // Starts readable: the device is awake, a sleep attempt must return at once.
  nudge_ = Fd(::eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!nudge_.valid()) throw Error("shm transport: eventfd: " + transport::errno_text(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kNudgeId;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, nudge_.get(), &ev) != 0)
    throw Error("shm transport: epoll_ctl: " + transport::errno_text(errno));
  std::random_device rd;
  probe_word_ = (uint64_t(rd()) << 32 | rd()) | 1;
}

ShmDevice::~ShmDevice() = default;

void ShmDevice::add_pair(PairSetup s) {
  const int peer = s.peer;
  const int fd = s.sock.get();
  pairs_[static_cast<size_t>(peer)] = std::make_unique<ShmPair>(this, sink_, std::move(s));
  list_.push_back(pairs_[static_cast<size_t>(peer)].get());
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u32 = static_cast<uint32_t>(peer);
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    throw Error("shm transport: epoll_ctl: " + transport::errno_text(errno));
}

std::unique_ptr<ShmDevice> ShmDevice::adopt(int size, transport::FailureSink* sink, PairSetup s) {
  std::unique_ptr<ShmDevice> dev(new ShmDevice(size, sink));
  dev->waiter_membarrier_ = s.light_fence;  // the caller plays the peer's half
  dev->add_pair(std::move(s));
  return dev;
}

bool ShmDevice::reaches(const transport::Bootstrap& b, int peer) {
  if (peer < 0 || b.rank < 0) return false;
  size_t p = static_cast<size_t>(peer), me = static_cast<size_t>(b.rank);
  return p < b.host_ids.size() && me < b.host_ids.size() && !b.host_ids[me].empty() && b.host_ids[p] == b.host_ids[me];
}

transport::Pair* ShmDevice::pair(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= pairs_.size()) return nullptr;
  return pairs_[static_cast<size_t>(peer)].get();
}

bool ShmDevice::progress_pairs() {
  bool moved = false;
  for (ShmPair* p : list_) moved |= p->progress();
  return moved;
}

bool ShmDevice::check_sockets() {
  polls_since_socket_check_ = 0;
  epoll_event evs[64];
  int n = ::epoll_wait(epfd_.get(), evs, 64, 0);
  bool changed = false;
  for (int i = 0; i < n; ++i) {
    uint32_t id = evs[i].data.u32;
    if (id == kNudgeId || id >= pairs_.size() || !pairs_[id]) continue;
    changed |= pairs_[id]->read_socket();
  }
  return changed;
}

bool ShmDevice::poll() {
  // No clock read and no system call here: a rank waiting for a small message polls millions
  // of times a second. Sleeping is the engine's decision (prepare_sleep); polling means awake.
  if (armed_) disarm();
  bool moved = progress_pairs();
  if (++polls_since_socket_check_ >= kPollsBetweenSocketChecks) moved |= check_sockets();
  return moved;
}

bool ShmDevice::prepare_sleep() { return armed_ ? false : arm(); }

bool ShmDevice::arm() {
  bool raised = false;
  for (ShmPair* p : list_) raised |= p->set_waiting(true);
  // The flags before the last look, on our side and on every peer's that skipped its fence
  // (with no flag raised no peer has anything to ring for: an idle rank sleeps without it).
  if (raised && waiter_membarrier_) heavy_fence();
  // Drain the sockets first, then look at the rings once more. A peer that published before it
  // could see our flag did not ring, so what it published must be found by this last look; one
  // that saw the flag rang, and its doorbell must either still be unread when we sleep (it wakes
  // us) or have been read before that last look. The other order loses a wake-up: a doorbell
  // read after the look, for a slot published after it, and then a sleep until the timeout
  // (50 ms stalls at 4 ranks on 2 cores).
  bool moved = check_sockets();
  moved |= progress_pairs();
  if (moved) {
    for (ShmPair* p : list_) p->set_waiting(false);
    return true;
  }
  uint64_t v;
  ssize_t ignored = ::read(nudge_.get(), &v, sizeof v);
  (void)ignored;
  armed_ = true;
  return false;
}

void ShmDevice::disarm() {
  for (ShmPair* p : list_) p->set_waiting(false);
  uint64_t one = 1;
  ssize_t ignored = ::write(nudge_.get(), &one, sizeof one);
  (void)ignored;
  armed_ = false;
}

void ShmDevice::adopt_pair(std::unique_ptr<ShmPair> p) {
  const int peer = p->peer();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u32 = static_cast<uint32_t>(peer);
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, p->fd(), &ev) != 0)
    throw Error("shm transport: epoll_ctl: " + transport::errno_text(errno));
  list_.push_back(p.get());
  pairs_[static_cast<size_t>(peer)] = std::move(p);
}

std::vector<int> ShmDevice::reusable_peers() const {
  std::vector<int> out;
  for (const ShmPair* p : list_)
    if (p->reusable()) out.push_back(p->peer());
  return out;
}

std::unique_ptr<transport::Device> ShmDevice::hand_over(const Handover& h) {
  std::unique_ptr<ShmDevice> dev(new ShmDevice(h.boot.size, h.boot.failures));
  dev->own_ = own_;
  dev->peers_ = peers_;
  dev->waiter_membarrier_ = waiter_membarrier_;
  const uint64_t token = transport::group_hash(h.boot.prefix);
  struct Moving {
    std::unique_ptr<ShmPair> pair;
    int old_peer, peer;
    bool done = false;
  };
  std::vector<Moving> moving;
  for (const auto& [old_peer, peer] : h.keep) {
    ShmPair* p = old_peer >= 0 && static_cast<size_t>(old_peer) < pairs_.size() ? pairs_[static_cast<size_t>(old_peer)].get() : nullptr;
    if (p == nullptr || !p->reusable() || peer < 0 || peer >= h.boot.size)
      throw Error("shm transport: the connection to rank " + std::to_string(old_peer) + " cannot be handed over");
    // From here on the pair is the new group's: this device neither polls nor closes it (its
    // socket left this device's epoll set when it aborted).
    std::erase(list_, p);
    Moving m{std::move(pairs_[static_cast<size_t>(old_peer)]), old_peer, peer};
    m.pair->begin_resync(token, h.boot.rank, h.boot.size, peer);
    moving.push_back(std::move(m));
  }
  transport::drive_hand_over(moving, "shm transport", h.boot.rank, h.boot.deadline,
                             [&] { transport::throw_if_peer_gave_up(h.boot, " (while handing connections over)"); });
  for (auto& m : moving) {
    m.pair->finish_resync(dev.get(), m.peer, h.boot.failures);
    dev->adopt_pair(std::move(m.pair));
  }
  return dev;
}

void ShmDevice::forget_socket(int fd) { ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void ShmDevice::abort(const std::string& reason) {
  for (ShmPair* p : list_) p->abort(reason);
  if (armed_) disarm();
}

std::vector<int> ShmDevice::close(std::chrono::steady_clock::time_point deadline) {
  for (ShmPair* p : list_) p->set_closing();
  note_post();  // closing pairs wait for more (a goodbye, data to skip): re-arm with that in mind
  std::vector<int> missing;
  for (;;) {
    poll();
    check_sockets();
    missing.clear();
    for (ShmPair* p : list_) {
      if (p->done()) continue;
      p->try_send_bye();
      if (!p->closed_cleanly()) missing.push_back(p->peer());
    }
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
    // Sleep until a peer's socket speaks (its goodbye) or 10 ms pass. The nudge is readable
    // whenever the device is not armed, and with it in the epoll set this poll returned at
    // once: a rank that finished first spun here, two system calls a turn, on the cores its
    // peers still needed (1,100-1,300 turns per rank at the end of a 4-rank run on 2 cores).
    uint64_t v;
    ssize_t ignored = ::read(nudge_.get(), &v, sizeof v);
    (void)ignored;
    pollfd pf{epfd_.get(), POLLIN, 0};
    ::poll(&pf, 1, 10);
  }
  for (ShmPair* p : list_) p->shutdown_socket();
  return missing;
}

// The highest priority: every peer on this host goes through shared memory.
KOLO_REGISTER_TRANSPORT(shm, {"shm", 20, &ShmDevice::reaches, &ShmDevice::connect});

}  // namespace kolo::shm

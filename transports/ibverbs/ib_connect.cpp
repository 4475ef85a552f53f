// IbDevice setup: the port, the verbs objects, the exchange of queue-pair data through the
// store, and the control channel (whose handshake checks the job secret and, completing, proves
// that the peer's queue pair is ready to receive).
#include <fcntl.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/log.hpp"
#include "common/config.hpp"
#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "transports/ibverbs/ib_device.hpp"
#include "transports/common/setup_text.hpp"
#include "transports/control_channel.hpp"
#include "transports/setup_failure.hpp"

namespace kolo::ib {

using transport::Bootstrap;

namespace {

std::string usable_key(const Bootstrap& b, int rank) { return b.prefix + "/ib/usable/" + std::to_string(rank); }
std::string conn_key(const Bootstrap& b, int from, int to) {
  return b.prefix + "/ib/qp/" + std::to_string(from) + "/" + std::to_string(to);
}

RingGeometry geometry_from_config() {
  int64_t slot = config::get_int("KOLO_IB_SLOT_BYTES");
  int64_t n = config::get_int("KOLO_IB_SLOTS");
  if (slot < 128 || slot > (int64_t(1) << 30) || slot % 64 != 0)
    throw InvalidArgument("KOLO_IB_SLOT_BYTES=" + std::to_string(slot) + " must be a multiple of 64 between 128 and 1G");
  if (n < 2 || n > 4096) throw InvalidArgument("KOLO_IB_SLOTS=" + std::to_string(n) + " must be between 2 and 4096");
  return RingGeometry{static_cast<size_t>(slot), static_cast<size_t>(n)};
}

// Waits for `key`, looking every 200 ms whether another rank gave up setting up (and why).
Bytes wait_for_key(const Bootstrap& b, const std::string& key, int peer) {
  for (;;) {
    if (b.store->check({key})) return b.store->get(key);
    if (auto why = transport::peer_setup_failure(b))
      throw PeerError("rank " + std::to_string(b.rank) + " stopped waiting for its peers: " + *why, -1);
    if (std::chrono::steady_clock::now() >= b.deadline)
      throw TimeoutError("rank " + std::to_string(b.rank) + " timed out waiting for the RDMA connection data of rank " +
                         std::to_string(peer));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void set_nonblocking(int fd, const char* what) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    throw Error(std::string("ibverbs transport: making the ") + what + " non-blocking: " + transport::errno_text(errno));
}

void watch(int epfd, int fd, const char* what) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
    throw Error(std::string("ibverbs transport: epoll_ctl (") + what + "): " + transport::errno_text(errno));
}

}  // namespace

bool IbDevice::reaches(const Bootstrap& b, int peer) {
  const bool mine = port_problem().empty();
  // Forced, the bootstrap would only say "cannot reach"; the reason is more use.
  if (!mine && config::get_string("KOLO_TRANSPORT") == "ibverbs")
    throw InvalidArgument("KOLO_TRANSPORT=ibverbs, but " + port_problem());
  const size_t me = static_cast<size_t>(b.rank), p = static_cast<size_t>(peer);
  const bool same_host = me < b.host_ids.size() && p < b.host_ids.size() && b.host_ids[me] == b.host_ids[p];
  if (same_host || !b.store) return mine;  // one host: the same devices on both ends
  // Both ends must agree, or one would wait for a queue pair while the other dials TCP.
  b.store->set(usable_key(b, b.rank), mine ? "1" : "0");
  if (!mine) return false;
  return b.store->get_string(usable_key(b, peer)) == "1";
}

std::unique_ptr<transport::Device> IbDevice::connect(const Bootstrap& b, const std::vector<int>& peers) {
  std::unique_ptr<IbDevice> dev(new IbDevice(b.size, b.failures));
  try {
    dev->connect_or_throw(b, peers);
    return dev;
  } catch (const std::exception& e) {
    // Peers may be waiting in the store exchange (they look under the group's prefix) or in the
    // side connections' accept loop (which looks under the side prefix): tell both.
    transport::publish_setup_failure(b, e.what());
    Bootstrap side = b;
    side.prefix = b.prefix + "/ib";
    transport::publish_setup_failure(side, e.what());
    throw;
  }
}

void IbDevice::connect_or_throw(const Bootstrap& b, const std::vector<int>& peers) {
  const RingGeometry g = geometry_from_config();
  port_ = open_port();
  ibv_context* ctx = port_.ctx.get();
  KOLO_LOG(debug, "ibverbs: using " << port_.choice.describe());
  if (gpudirect_module_loaded())
    KOLO_LOG(info, "ibverbs: GPUDirect RDMA module loaded, but kolo moves host memory only (see docs/RDMA.md)");

  errno = 0;
  pd_.reset(ibv_alloc_pd(ctx));
  if (!pd_) throw_verbs_error("ibv_alloc_pd", errno);
  errno = 0;
  channel_.reset(ibv_create_comp_channel(ctx));
  if (!channel_) throw_verbs_error("ibv_create_comp_channel", errno);
  set_nonblocking(channel_->fd, "completion channel");
  set_nonblocking(ctx->async_fd, "async event fd");
  ibv_device_attr da{};
  if (int rc = ibv_query_device(ctx, &da); rc != 0) throw_verbs_error("ibv_query_device", rc);
  const int want_cqe = static_cast<int>(peers.size()) * (IbPair::send_depth(g) + IbPair::recv_depth(g));
  if (want_cqe > da.max_cqe)
    throw InvalidArgument("ibverbs transport: " + std::to_string(peers.size()) + " peers with KOLO_IB_SLOTS=" +
                          std::to_string(g.nslots) + " need a completion queue of " + std::to_string(want_cqe) +
                          " entries; " + port_.choice.device + " allows " + std::to_string(da.max_cqe));
  errno = 0;
  cq_.reset(ibv_create_cq(ctx, std::max(want_cqe, 1), nullptr, channel_.get(), 0));
  if (!cq_) throw_verbs_error("ibv_create_cq", errno, " (" + std::to_string(want_cqe) + " entries)");

  // 1. A queue pair and rings per peer; publish what each peer needs.
  for (int peer : peers) {
    pairs_[static_cast<size_t>(peer)] = std::make_unique<IbPair>(sink_, peer, pd_.get(), cq_.get(), g, port_.choice);
    list_.push_back(pairs_[static_cast<size_t>(peer)].get());
    const ConnInfo info = list_.back()->local_info();
    const auto* raw = reinterpret_cast<const uint8_t*>(&info);
    b.store->set(conn_key(b, b.rank, peer), Bytes(raw, raw + sizeof info));
  }
  // 2. Bring every queue pair to ready-to-send with its peer's data.
  for (IbPair* p : list_) {
    const Bytes got = wait_for_key(b, conn_key(b, p->peer(), b.rank), p->peer());
    ConnInfo remote{};
    if (got.size() != sizeof remote)
      throw Error("ibverbs transport: connection data from rank " + std::to_string(p->peer()) + " has " +
                  std::to_string(got.size()) + " bytes, expected " + std::to_string(sizeof remote) + " (mixed kolo versions?)");
    std::memcpy(&remote, got.data(), sizeof remote);
    p->connect(remote);
  }
  // 3. The side connections. A peer answers their handshake only after its step 2, so once they
  //    are up no write can reach a queue pair that is not ready for it.
  Bootstrap side = b;
  side.prefix = b.prefix + "/ib";
  side.failures = this;
  side_ = transport::connect_control_channel(side, peers);

  epfd_ = transport::Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_.valid()) throw Error("ibverbs transport: epoll_create1: " + transport::errno_text(errno));
  watch(epfd_.get(), side_->wait_fd(), "side connections");
  watch(epfd_.get(), channel_->fd, "completion channel");
  watch(epfd_.get(), ctx->async_fd, "async events");
  KOLO_LOG(debug, "ibverbs: connected to " << peers.size() << " peer(s) over " << port_.choice.describe() << ", rings of "
                                           << g.nslots << " x " << g.slot_bytes << " bytes");
}

}  // namespace kolo::ib

// IbDevice at run time: completions, progress, sleeping, abort and the orderly close.
#include "transports/ibverbs/ib_device.hpp"

#include <poll.h>

#include <cerrno>

#include "common/log.hpp"
#include "kolo/error.hpp"

namespace kolo::ib {

using transport::Failure;

namespace {
// Side sockets and async events are looked at every so many busy polls (each look is a system
// call), and on every idle one.
constexpr unsigned kPollsBetweenSideChecks = 64;
}  // namespace

IbDevice::IbDevice(int size, transport::FailureSink* sink) : sink_(sink), pairs_(static_cast<size_t>(size)) {}

IbDevice::~IbDevice() = default;

transport::Pair* IbDevice::pair(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= pairs_.size()) return nullptr;
  return pairs_[static_cast<size_t>(peer)].get();
}

IbPair* IbDevice::pair_of_qp(uint32_t qpn) {
  for (IbPair* p : list_)
    if (p->qpn() == qpn) return p;
  return nullptr;
}

void IbDevice::report_failure(int peer, Failure why, const std::string& detail) {
  if (sink_) sink_->peer_failed(peer, why, detail);
}

void IbDevice::peer_failed(int peer, Failure why, const std::string& detail) {
  IbPair* p = peer >= 0 && static_cast<size_t>(peer) < pairs_.size() ? pairs_[static_cast<size_t>(peer)].get() : nullptr;
  if (p) p->fail(why, detail);  // reports to our sink
  else report_failure(peer, why, detail);
}

void IbDevice::fail_all(const std::string& detail) {
  for (IbPair* p : list_) p->fail(Failure::io_error, detail);
}

bool IbDevice::poll_cq() {
  bool moved = false;
  ibv_wc wcs[32];
  for (;;) {
    int n = ibv_poll_cq(cq_.get(), 32, wcs);
    if (n < 0) {
      fail_all("ibverbs transport: " + verbs_error("ibv_poll_cq", errno ? errno : -n));
      return true;
    }
    for (int i = 0; i < n; ++i) {
      IbPair* p = pair_of_qp(wcs[i].qp_num);
      if (p) moved |= p->on_completion(wcs[i]);
      moved = true;  // arrivals and credits are turned into progress by progress_pairs()
    }
    if (n < 32) return moved;
  }
}

bool IbDevice::drain_channel() {
  bool got = false;
  for (;;) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(channel_.get(), &cq, &ctx) != 0) break;  // EAGAIN: the fd is non-blocking
    ibv_ack_cq_events(cq, 1);
    got = true;
  }
  if (got) armed_ = false;
  return got;
}

void IbDevice::handle_async_events() {
  for (;;) {
    ibv_async_event ev{};
    if (ibv_get_async_event(port_.ctx.get(), &ev) != 0) return;  // EAGAIN
    const ibv_event_type type = ev.event_type;
    IbPair* p = nullptr;
    if (type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR || type == IBV_EVENT_QP_ACCESS_ERR)
      p = pair_of_qp(ev.element.qp->qp_num);
    const uint8_t port = (type == IBV_EVENT_PORT_ERR) ? static_cast<uint8_t>(ev.element.port_num) : 0;
    ibv_ack_async_event(&ev);
    const std::string what = std::string("ibverbs transport: ") + ibv_event_type_str(type);
    if (p) {
      p->fail(Failure::io_error, what + " on the queue pair for rank " + std::to_string(p->peer()));
    } else if (type == IBV_EVENT_PORT_ERR && port == port_.choice.port) {
      fail_all(what + ": " + port_.choice.device + " port " + std::to_string(port) + " went down");
    } else if (type == IBV_EVENT_CQ_ERR || type == IBV_EVENT_DEVICE_FATAL) {
      fail_all(what + " on " + port_.choice.device);
    } else {
      KOLO_LOG(debug, "ibverbs: async event " << ibv_event_type_str(type));
    }
  }
}

bool IbDevice::progress_pairs() {
  bool moved = false;
  for (IbPair* p : list_) moved |= p->progress();
  return moved;
}

bool IbDevice::poll() {
  bool moved = poll_cq();
  moved |= progress_pairs();
  if (moved && ++polls_ % kPollsBetweenSideChecks != 0) return true;
  // Idle, or due: the side sockets (deaths, aborts), async events, and arming for sleep.
  moved |= side_->poll();
  handle_async_events();
  drain_channel();
  if (!moved && !armed_) {
    if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) {
      fail_all("ibverbs transport: " + verbs_error("ibv_req_notify_cq", rc));
      return true;
    }
    armed_ = true;
    // A completion that came between the last poll and arming raises no event: look again.
    moved |= poll_cq();
    moved |= progress_pairs();
  }
  return moved;
}

void IbDevice::abort(const std::string& reason) {
  for (IbPair* p : list_) p->abort(reason);
  side_->abort(reason);
}

std::vector<int> IbDevice::close(std::chrono::steady_clock::time_point deadline) {
  // 1. Stop holding back messages nobody will receive, and flush our writes (until each is
  //    acknowledged) while returning credits, so that peers can flush theirs.
  for (IbPair* p : list_) p->set_closing();
  std::vector<bool> bye_sent(pairs_.size(), false);
  std::vector<int> missing;
  for (;;) {
    poll();
    side_->poll();
    missing.clear();
    for (IbPair* p : list_) {
      const int peer = p->peer();
      if (p->failed() || side_->failed(peer)) continue;
      // 2. Say goodbye on the control channel only once everything we sent has landed: the
      //    peer takes a goodbye to mean that no more data will come.
      if (!bye_sent[static_cast<size_t>(peer)] && p->sends_drained()) {
        side_->send_goodbye(peer);
        bye_sent[static_cast<size_t>(peer)] = true;
      }
      if (side_->goodbye_received(peer)) p->set_finished();
      if (!(bye_sent[static_cast<size_t>(peer)] && side_->goodbye_received(peer) && side_->goodbye_flushed(peer)))
        missing.push_back(peer);
    }
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
    pollfd pf{epfd_.get(), POLLIN, 0};
    ::poll(&pf, 1, 1);
  }
  for (IbPair* p : list_) side_->hang_up(p->peer());
  return missing;
}

// Between tcp and shm: chosen for peers on other hosts when both ends have an active port.
KOLO_REGISTER_TRANSPORT(ibverbs, {"ibverbs", 15, &IbDevice::reaches, &IbDevice::connect});

}  // namespace kolo::ib

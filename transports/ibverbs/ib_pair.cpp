#include "transports/ibverbs/ib_pair.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "kolo/error.hpp"
#include "transports/ibverbs/ib_device.hpp"

namespace kolo::ib {

using transport::Failure;
using transport::Request;
using transport::Tag;

namespace {
// wr_id of work requests that are not data writes (whose wr_id is the slot sequence number).
constexpr uint64_t kCreditWr = uint64_t(1) << 63;
constexpr uint64_t kRecvWr = uint64_t(1) << 62;

// Local ACK timeout 4.096 us * 2^14 = 67 ms, 7 retries: a dead or unreachable peer shows up as
// IBV_WC_RETRY_EXC_ERR after about half a second (its death usually earlier, on the side socket).
constexpr uint8_t kAckTimeout = 14;
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetryForever = 7;  // never expected: credits keep receives posted
constexpr uint8_t kMinRnrTimer = 12;

const char* opcode_name(const ibv_wc& wc) {
  if (wc.wr_id & kRecvWr) return "receive";
  if (wc.wr_id & kCreditWr) return "credit send";
  return "RDMA write";
}
}  // namespace

IbPair::IbPair(transport::FailureSink* sink, int peer, ibv_pd* pd, ibv_cq* cq, const RingGeometry& g, const PortChoice& port)
    : PairBase(peer, sink),
      geo_(g),
      port_(port),
      staging_(pd, g.slot_bytes * g.nslots, IBV_ACCESS_LOCAL_WRITE, "the staging ring towards rank " + std::to_string(peer)),
      ring_(pd, g.slot_bytes * g.nslots, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
            "the receive ring of rank " + std::to_string(peer)),
      sq_depth_(send_depth(g)) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = static_cast<uint32_t>(send_depth(g));
  ia.cap.max_recv_wr = static_cast<uint32_t>(recv_depth(g));
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  errno = 0;
  qp_.reset(ibv_create_qp(pd, &ia));
  if (!qp_) throw_verbs_error("ibv_create_qp", errno, " (queue pair for " + who() + ")");
  std::random_device rd;
  psn_ = rd() & 0xffffff;

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port_.port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (int rc = ibv_modify_qp(qp_.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS); rc != 0)
    throw_verbs_error("ibv_modify_qp(INIT)", rc, " (queue pair for " + who() + ")");
  if (std::string e = post_receives(recv_depth(g)); !e.empty()) throw Error("ibverbs transport: " + e);
}

IbPair::~IbPair() = default;

ConnInfo IbPair::local_info() const {
  ConnInfo c{};
  c.magic = kConnMagic;
  c.qpn = qp_->qp_num;
  c.psn = psn_;
  c.lid = port_.lid;
  c.mtu = static_cast<uint8_t>(port_.mtu);
  c.roce = port_.roce;
  std::memcpy(c.gid, port_.gid.raw, sizeof c.gid);
  c.ring_addr = reinterpret_cast<uint64_t>(ring_.data());
  c.ring_rkey = ring_.rkey();
  c.slot_bytes = static_cast<uint32_t>(geo_.slot_bytes);
  c.nslots = static_cast<uint32_t>(geo_.nslots);
  return c;
}

void IbPair::connect(const ConnInfo& r) {
  const std::string ctx = " (queue pair for " + who() + ")";
  if (r.magic != kConnMagic) throw Error("ibverbs transport: malformed connection data from " + who());
  if (r.slot_bytes != geo_.slot_bytes || r.nslots != geo_.nslots)
    throw InvalidArgument("ibverbs transport: " + who() + " uses rings of " + std::to_string(r.nslots) + " x " +
                          std::to_string(r.slot_bytes) + " bytes, this rank " + std::to_string(geo_.nslots) + " x " +
                          std::to_string(geo_.slot_bytes) + " (KOLO_IB_SLOTS / KOLO_IB_SLOT_BYTES differ between ranks?)");
  if (static_cast<bool>(r.roce) != port_.roce)
    throw Error("ibverbs transport: " + who() + " uses " + (r.roce ? "RoCE" : "InfiniBand") + ", this rank " +
                (port_.roce ? "RoCE" : "InfiniBand") + ": the ports cannot talk to each other");
  remote_ring_ = r.ring_addr;
  remote_rkey_ = r.ring_rkey;

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = std::min(port_.mtu, static_cast<ibv_mtu>(r.mtu));
  a.dest_qp_num = r.qpn;
  a.rq_psn = r.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = kMinRnrTimer;
  a.ah_attr.port_num = port_.port;
  a.ah_attr.dlid = r.lid;
  if (port_.gid_index >= 0) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, r.gid, sizeof r.gid);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(port_.gid_index);
    a.ah_attr.grh.hop_limit = 64;
  }
  if (int rc = ibv_modify_qp(qp_.get(), &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0)
    throw_verbs_error("ibv_modify_qp(RTR)", rc, ctx + " (wrong GID index or MTU? see docs/RDMA.md)");

  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = kAckTimeout;
  a.retry_cnt = kRetryCount;
  a.rnr_retry = kRnrRetryForever;
  a.sq_psn = psn_;
  a.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(qp_.get(), &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0)
    throw_verbs_error("ibv_modify_qp(RTS)", rc, ctx);
}

std::string IbPair::post_receives(int n) {
  // Zero-length receives: data lands in the ring by RDMA write, credits travel in immediates.
  for (int i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = kRecvWr;
    wr.num_sge = 0;
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(qp_.get(), &wr, &bad); rc != 0)
      return "posting a receive for " + who() + ": " + verbs_error("ibv_post_recv", rc);
  }
  return "";
}

void IbPair::on_send_posted() {
  if (sends_.size() == 1) pump_sends();
}

void IbPair::on_recv_posted() {
  if (consumed_ < arrived_ && deliver_slots()) return_credits();
}

bool IbPair::pump_sends() {
  bool moved = false;
  const size_t payload = geo_.slot_bytes - kSlotHeaderBytes;
  while (!sends_.empty() && !failed_) {
    if (sent_ - credits_ >= geo_.nslots || sent_ - writes_done_ >= geo_.nslots || sq_outstanding_ >= sq_depth_ - 1) break;
    SendOp& op = sends_.front();
    const size_t chunk = std::min(op.bytes - op.done, payload);
    const size_t slot = static_cast<size_t>(sent_ % geo_.nslots);
    char* s = staging_.data() + slot * geo_.slot_bytes;
    SlotHeader h{};
    std::memcpy(h.tag, op.tag.w, sizeof h.tag);
    h.msg_bytes = op.bytes;
    h.offset = op.done;
    h.chunk_bytes = chunk;
    h.seq = sent_;
    std::memcpy(s, &h, sizeof h);
    if (chunk) std::memcpy(s + kSlotHeaderBytes, op.buf + op.done, chunk);

    ibv_sge sge{reinterpret_cast<uint64_t>(s), static_cast<uint32_t>(kSlotHeaderBytes + chunk), staging_.lkey()};
    ibv_send_wr wr{};
    wr.wr_id = sent_;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(sent_));
    wr.wr.rdma.remote_addr = remote_ring_ + slot * geo_.slot_bytes;
    wr.wr.rdma.rkey = remote_rkey_;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) {
      fail(Failure::io_error, "RDMA write to " + who() + ": " + verbs_error("ibv_post_send", rc));
      return true;
    }
    ++sent_;
    ++sq_outstanding_;
    op.done += chunk;
    op.req->transferred = op.done;
    if (op.done == op.bytes) {
      inflight_.push_back(InflightSend{sent_, op.req});
      sends_.pop_front();
    }
    moved = true;
  }
  return moved;
}

bool IbPair::peek_header(Tag* tag, uint64_t* bytes) const {
  if (consumed_ >= arrived_) return false;
  const char* s = ring_.data() + static_cast<size_t>(consumed_ % geo_.nslots) * geo_.slot_bytes;
  SlotHeader h;
  std::memcpy(&h, s, sizeof h);
  // Only a message's first chunk; a corrupt slot is reported by deliver_slots() once a receive
  // is posted.
  if (h.seq != consumed_ || h.offset != 0) return false;
  std::memcpy(tag->w, h.tag, sizeof tag->w);
  *bytes = h.msg_bytes;
  return true;
}

bool IbPair::deliver_slots() {
  bool moved = false;
  const size_t payload = geo_.slot_bytes - kSlotHeaderBytes;
  while (consumed_ < arrived_ && !failed_) {
    const char* s = ring_.data() + static_cast<size_t>(consumed_ % geo_.nslots) * geo_.slot_bytes;
    SlotHeader h;
    std::memcpy(&h, s, sizeof h);
    if (h.seq != consumed_ || h.chunk_bytes > payload || h.offset + h.chunk_bytes > h.msg_bytes) {
      fail(Failure::io_error, "corrupt slot from " + who() + " (sequence " + std::to_string(h.seq) + ", expected " +
                                  std::to_string(consumed_) + ")");
      return true;
    }
    if (recvs_.empty()) {
      if (!closing_) break;
      // Closing and nobody receives it: a program error on some rank, but the goodbye must get through.
      ++consumed_;
      ++owed_;
      continue;
    }
    RecvOp& r = recvs_.front();
    if (r.done == 0 && h.offset == 0) {
      Tag got;
      std::memcpy(got.w, h.tag, sizeof got.w);
      if (!match_first_recv(got, h.msg_bytes)) return true;
    }
    if (h.offset != r.done) {
      fail(Failure::io_error, "chunk out of order from " + who());
      return true;
    }
    if (h.chunk_bytes) std::memcpy(r.buf + h.offset, s + kSlotHeaderBytes, h.chunk_bytes);
    r.done += h.chunk_bytes;
    r.req->transferred = r.done;
    ++consumed_;
    ++owed_;
    if (r.done == r.bytes) complete_first_recv();
    moved = true;
  }
  return moved;
}

bool IbPair::return_credits() {
  if (owed_ == 0 || failed_ || finished_ || sq_outstanding_ >= sq_depth_) return false;
  ibv_send_wr wr{};
  wr.wr_id = kCreditWr;
  wr.num_sge = 0;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(static_cast<uint32_t>(owed_));
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) {
    fail(Failure::io_error, "credit message to " + who() + ": " + verbs_error("ibv_post_send", rc));
    return true;
  }
  owed_ = 0;
  ++sq_outstanding_;
  return false;
}

bool IbPair::progress() {
  if (failed_) return false;
  bool moved = pump_sends();
  moved |= deliver_slots();
  moved |= return_credits();
  return moved;
}

bool IbPair::on_completion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    if (failed_ || finished_) return false;  // flushed after the first error, or the peer is gone
    std::string text = std::string(opcode_name(wc)) + (wc.wr_id & kRecvWr ? " from " : " to ") + who() +
                       " failed: " + ibv_wc_status_str(wc.status) + " (vendor error " + std::to_string(wc.vendor_err) + ")";
    if (wc.status == IBV_WC_RETRY_EXC_ERR)
      text += "; the peer stopped answering: it died, or its port, GID, MTU or the network path is wrong (docs/RDMA.md)";
    fail(Failure::io_error, text);
    return true;
  }
  if (wc.wr_id & kRecvWr) {
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      ++arrived_;
    } else if (wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM)) {
      credits_ += ntohl(wc.imm_data);
    }
    if (std::string e = post_receives(1); !e.empty() && !failed_) {
      fail(Failure::io_error, e);
      return true;
    }
    return false;  // progress() turns arrivals and credits into completed requests
  }
  --sq_outstanding_;
  if (wc.wr_id & kCreditWr) return false;
  ++writes_done_;
  bool moved = false;
  while (!inflight_.empty() && inflight_.front().seq_end <= writes_done_) {
    complete(inflight_.front().req);
    inflight_.pop_front();
    moved = true;
  }
  return moved;
}

void IbPair::fail_held(Failure why, const std::string& detail) {
  for (size_t i = 0; i < inflight_.size(); ++i)
    if (Request* r = inflight_[i].req; r->state == Request::State::pending) r->fail(why, detail);
  inflight_.clear();
}

}  // namespace kolo::ib

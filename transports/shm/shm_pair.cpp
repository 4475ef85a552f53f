// The shared-memory pair's data path (the class: shm_pair.hpp): construction, what a post
// starts, and the messages that go through the ring's slots: a small message whole in one slot,
// a longer one in pieces the receiver drains while the sender fills the next, a large one only
// described (read from the sender's memory: shm_pair_remote_read.cpp); the direct path
// (send_now/recv_now); the peek at the next header; and the doorbell that wakes a sleeping peer
// after a slot is published or freed. The hot calls stay in this one file so that they inline.
// The control socket is shm_pair_control.cpp; aborts and the hand-over, shm_pair_abort_handover.cpp.
#include "transports/shm/shm_pair.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/thread_fence.hpp"
#include "transports/shm/shm_device.hpp"

namespace kolo::shm {

using transport::Failure;
using transport::Request;
using transport::Tag;

ShmPair::ShmPair(ShmDevice* dev, transport::FailureSink* sink, PairSetup s)
    : PairBase(s.peer, sink),
      dev_(dev),
      in_(s.in),
      out_(s.out),
      sock_(std::move(s.sock)),
      peer_pid_(s.peer_pid),
      peer_reads_us_(s.peer_reads_us),
      cma_min_(s.cma_min_bytes),
      help_peer_(s.help_peer),
      light_fence_(s.light_fence) {}

ShmPair::~ShmPair() = default;

void ShmPair::on_send_posted() {
  dev_->note_post();
  // Try at once: a small message is usually in the ring (and the send done) before this returns.
  if (sends_.size() == 1) pump_sends();
}

void ShmPair::on_recv_posted() {
  dev_->note_post();
  // The message may be waiting in the ring already.
  if (recvs_.size() == 1) pump_recvs();
}

bool ShmPair::progress() {
  if (failed_ || gone_) return false;
  bool moved = false;
  if (!sends_.empty() || !described_.empty()) moved |= pump_sends();
  if (!failed_) moved |= pump_recvs();
  return moved;
}

// ---- sending ----

bool ShmPair::slot_free() {
  if (next_out_ - tail_seen_ < out_.nslots) return true;
  tail_seen_ = out_.ctl->tail.load(std::memory_order_acquire);
  return next_out_ - tail_seen_ < out_.nslots;
}

void ShmPair::publish(SlotHeader* h) {
  h->seq.store(next_out_ + 1, std::memory_order_release);
  ++next_out_;
}

bool ShmPair::pump_sends() {
  bool moved = false, published = false;
  while (!sends_.empty() && slot_free()) {
    SendOp& op = sends_.front();
    SlotHeader* h = out_.slot(next_out_);
    if (describes(op.bytes)) {
      h->kind = SlotKind::cma;
      h->len = 0;
      h->total = op.bytes;
      std::memcpy(h->tag, op.tag.w, sizeof h->tag);
      h->addr = reinterpret_cast<uint64_t>(op.buf);
      publish(h);
      published = moved = true;
      described_.push_back(DescribedSend{++described_count_, op.req, op.buf, op.bytes});
      sends_.pop_front();
      continue;
    }
    if (op.bytes <= kSmallBytes) {
      write_small(h, op.buf, op.bytes, op.tag);
      publish(h);
      published = moved = true;
      op.done = op.bytes;
      op.req->transferred = op.done;
      complete_first_send();
      continue;
    }
    // The first slot of a message carries its size and tag; a message with bytes in it has
    // done > 0 after its first slot (slots hold at least one payload byte).
    const bool first = op.done == 0;
    size_t piece = std::min(op.bytes - op.done, out_.payload_bytes());
    h->kind = first ? SlotKind::data : SlotKind::more;
    h->len = static_cast<uint32_t>(piece);
    if (first) {
      h->total = op.bytes;
      std::memcpy(h->tag, op.tag.w, sizeof h->tag);
    }
    if (piece > 0) std::memcpy(RingView::payload(h), op.buf + op.done, piece);
    publish(h);
    published = moved = true;
    op.done += piece;
    op.req->transferred = op.done;
    if (op.done == op.bytes) complete_first_send();
  }
  if (published) notify_receiver();
  if (!described_.empty()) {
    uint64_t read = out_.ctl->cma_done.load(std::memory_order_acquire);
    while (!described_.empty() && described_.front().number <= read) {
      Request* req = described_.front().req;
      req->transferred = req->bytes;
      complete(req);
      described_.pop_front();
      moved = true;
    }
    // Waiting for the peer to read it: copy a piece of it meanwhile (the core is ours anyway).
    if (!described_.empty() && help_peer_) moved |= help_remote_read();
  }
  return moved;
}

void ShmPair::write_small(SlotHeader* h, const char* buf, size_t bytes, const Tag& tag) {
  h->kind = SlotKind::small;
  h->len = static_cast<uint32_t>(bytes);
  std::memcpy(h->tag, tag.w, sizeof h->tag);
  if (bytes > 0) std::memcpy(RingView::small_payload(h), buf, bytes);
}

transport::Pair::Now ShmPair::send_now(const void* buf, size_t bytes, const Tag& tag) {
  // Behind posted sends (or described ones the peer still reads) it would overtake them; a
  // message that needs more than one slot, or would be described, goes the ordinary way.
  if (failed_ || gone_ || hung_up_ || !sends_.empty() || !described_.empty() || bytes > out_.payload_bytes() ||
      describes(bytes))
    return Now::declined;
  if (!slot_free()) return Now::full;
  dev_->note_post();
  SlotHeader* h = out_.slot(next_out_);
  if (bytes <= kSmallBytes) {
    write_small(h, static_cast<const char*>(buf), bytes, tag);
  } else {
    h->kind = SlotKind::data;
    h->len = static_cast<uint32_t>(bytes);
    h->total = bytes;
    std::memcpy(h->tag, tag.w, sizeof h->tag);
    std::memcpy(RingView::payload(h), buf, bytes);
  }
  publish(h);
  notify_receiver();
  return Now::sent;
}

bool ShmPair::recv_now(void* buf, size_t bytes, const Tag& tag) {
  // A posted receive, or a message half read or being skipped, owns the ring's next slot.
  if (failed_ || gone_ || !recvs_.empty() || in_state_ != In::idle) return false;
  SlotHeader* h = in_.slot(next_in_);
  if (h->seq.load(std::memory_order_acquire) != next_in_ + 1) return false;
  // Whole in this slot, and the very message expected; anything else (a described or longer
  // message, another tag or size, a corrupt slot) is left to a posted receive, which reports it.
  const SlotKind kind = h->kind;
  const bool small = kind == SlotKind::small;
  if (h->len != bytes || !(small ? bytes <= kSmallBytes : kind == SlotKind::data && h->total == bytes && bytes <= in_.payload_bytes()))
    return false;
  Tag got;
  std::memcpy(got.w, h->tag, sizeof got.w);
  if (!(got == tag)) return false;
  if (buf == nullptr) return true;
  dev_->note_post();
  if (bytes > 0) std::memcpy(buf, small ? RingView::small_payload(h) : RingView::payload(h), bytes);
  consume_slot();
  notify_sender();
  return true;
}

void ShmPair::fence_before_flag_check() const {
  // Pairs with the sleeper's "store flag, then look at the ring": one of the two sees the other.
  // With the light fence the sleeper's membarrier orders our store before our load for us.
  light_thread_fence(light_fence_);
}

void ShmPair::notify_receiver() {
  fence_before_flag_check();
  auto& w = out_.ctl->receiver_waiting;
  if (w.load(std::memory_order_relaxed) != 0 && w.exchange(0) != 0) ring_doorbell();
}

void ShmPair::notify_sender() {
  freed_ = false;
  fence_before_flag_check();
  auto& w = in_.ctl->sender_waiting;
  if (w.load(std::memory_order_relaxed) != 0 && w.exchange(0) != 0) ring_doorbell();
}

void ShmPair::ring_doorbell() {
  char c = static_cast<char>(Control::doorbell);
  // EAGAIN: the peer has unread wake-ups already. EPIPE: it is gone, its hang-up reports that.
  (void)::send(sock_.get(), &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

// ---- receiving ----

bool ShmPair::peek_header(Tag* tag, uint64_t* bytes) const {
  if (in_state_ != In::idle) return false;  // a message is half read or skipped
  SlotHeader* h = in_.slot(next_in_);
  if (h->seq.load(std::memory_order_acquire) != next_in_ + 1) return false;
  // The sender does not reuse the slot before we consume it, so these fields are stable; a
  // corrupt kind is reported by start_message() once a receive is posted.
  const SlotKind kind = h->kind;
  if (kind != SlotKind::data && kind != SlotKind::cma && kind != SlotKind::small) return false;
  std::memcpy(tag->w, h->tag, sizeof tag->w);
  *bytes = kind == SlotKind::small ? h->len : h->total;
  return true;
}

// An any-source receive that peeked here waits for this ring too (peek_wanted_), so the sender
// must ring the doorbell when it publishes while we sleep.
bool ShmPair::wants_inbound() const { return !recvs_.empty() || in_state_ != In::idle || closing_ || peek_wanted_; }

void ShmPair::consume_slot() {
  ++next_in_;
  in_.ctl->tail.store(next_in_, std::memory_order_release);
  freed_ = true;
}

bool ShmPair::pump_recvs() {
  // Nothing to receive into and nothing to skip: leave the ring (and its cache lines) alone.
  if (recvs_.empty() && in_state_ == In::idle && !closing_) return false;
  bool moved = false;
  while (!failed_) {
    if (in_state_ == In::read_remote) {
      moved |= pump_remote_read();
      if (in_state_ == In::read_remote) break;  // one piece per call; the engine polls again
      continue;
    }
    SlotHeader* h = in_.slot(next_in_);
    if (h->seq.load(std::memory_order_acquire) != next_in_ + 1) break;
    if (in_state_ == In::idle) {
      if (!start_message(h)) break;
      moved = true;
      continue;
    }
    // The next piece of a message that earlier slots began.
    // len comes from the peer: a continuation longer than a slot's payload would copy past the
    // slot (and past the segment's end), however much of the message is left.
    const uint32_t len = h->len;
    if (h->kind != SlotKind::more || len > left_ || len > in_.payload_bytes()) {
      fail(Failure::io_error, "corrupt shared-memory ring from " + who() + " (bad continuation slot)");
      break;
    }
    if (in_state_ == In::pieces) {
      std::memcpy(dst_, RingView::payload(h), len);
      dst_ += len;
    }
    left_ -= len;
    consume_slot();
    moved = true;
    if (in_state_ == In::pieces) recvs_.front().req->transferred = recvs_.front().bytes - left_;
    if (left_ == 0) {
      if (in_state_ == In::pieces) complete_first_recv();
      in_state_ = In::idle;
    }
  }
  if (freed_ && !failed_) notify_sender();
  return moved;
}

// A published first slot (data or descriptor) while no message is in progress. Returns false if
// it must wait for a receive, or if the pair failed.
bool ShmPair::start_message(SlotHeader* h) {
  // Read everything before consume_slot(): the sender may reuse the slot right after.
  const SlotKind kind = h->kind;
  const uint32_t len = h->len;
  const bool small = kind == SlotKind::small;
  // A small slot has no total (its message is all there) and no address.
  const uint64_t total = small ? len : h->total;
  const uint64_t addr = small ? 0 : h->addr;
  Tag got;
  std::memcpy(got.w, h->tag, sizeof got.w);
  if ((kind != SlotKind::data && kind != SlotKind::cma && !small) || len > total ||
      len > (small ? kSmallBytes : in_.payload_bytes())) {
    fail(Failure::io_error, "corrupt shared-memory ring from " + who() + " (bad first slot)");
    return false;
  }
  if (recvs_.empty()) {
    if (!closing_) return false;  // it waits for its receive
    // Closing and nobody will receive it (a program error on some rank): skip it, so that the
    // goodbye still gets through. A described message is counted read without reading it.
    consume_slot();
    if (kind == SlotKind::cma) {
      in_.ctl->cma_done.store(++remote_done_, std::memory_order_release);
    } else if (total > len) {
      left_ = total - len;
      in_state_ = In::discard;
    }
    return true;
  }
  if (!match_first_recv(got, total)) return false;
  RecvOp& op = recvs_.front();
  if (kind == SlotKind::cma) {
    remote_addr_ = addr;
    remote_got_ = remote_claimed_ = remote_returned_ = 0;
    in_state_ = In::read_remote;
    consume_slot();
    offer_help(op.buf);
    return true;
  }
  if (len > 0) std::memcpy(op.buf, small ? RingView::small_payload(h) : RingView::payload(h), len);
  consume_slot();
  if (len == op.bytes) {
    complete_first_recv();
  } else {
    in_state_ = In::pieces;
    dst_ = op.buf + len;
    left_ = op.bytes - len;
    op.req->transferred = len;
  }
  return true;
}

}  // namespace kolo::shm

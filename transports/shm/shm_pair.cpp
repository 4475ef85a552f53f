#include "transports/shm/shm_pair.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.hpp"
#include "common/thread_fence.hpp"
#include "kolo/error.hpp"

#include "transports/shm/shm_device.hpp"

namespace kolo::shm {

using transport::Failure;
using transport::Request;
using transport::Tag;

namespace {

constexpr uint64_t kPieceMask = 0xffffffffu;

size_t pieces_of(size_t bytes) { return (bytes + kRemotePieceBytes - 1) / kRemotePieceBytes; }
size_t piece_len(size_t bytes, uint64_t piece) {
  return std::min(kRemotePieceBytes, bytes - static_cast<size_t>(piece) * kRemotePieceBytes);
}

// Claims the next piece of `message` (numbered mod 2^32) in a ring's help_claim; false when the
// claim names another message or every piece is taken.
bool claim_piece(std::atomic<uint64_t>& claim, uint64_t message, uint64_t pieces, uint64_t* piece) {
  uint64_t c = claim.load(std::memory_order_acquire);
  while ((c >> 32) == (message & kPieceMask) && (c & kPieceMask) < pieces) {
    if (claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      *piece = c & kPieceMask;
      return true;
    }
  }
  return false;
}

}  // namespace

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

bool ShmPair::help_remote_read() {
  // The peer reads described messages in order: the oldest one is the one it may be reading.
  const DescribedSend& d = described_.front();
  const uint64_t pieces = pieces_of(d.bytes);
  uint64_t piece = 0;
  if (pieces < 2 || !claim_piece(out_.ctl->help_claim, d.number, pieces, &piece)) return false;
  // Written by the receiver before its release store of the claim we just took part in.
  const uint64_t dst = out_.ctl->help_dst;
  const size_t off = static_cast<size_t>(piece) * kRemotePieceBytes, len = piece_len(d.bytes, piece);
  size_t done = 0;
  while (done < len) {
    iovec local{const_cast<char*>(d.buf) + off + done, len - done};
    iovec remote{reinterpret_cast<void*>(dst + off + done), len - done};
    const ssize_t n = ::process_vm_writev(peer_pid_, &local, 1, &remote, 1, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (done == len) {
    helped_bytes_ += len;
    out_.ctl->help_done_bytes.fetch_add(len, std::memory_order_release);
  } else {
    // Refused after all (or the receiver's memory went away: it failed and will tell us): the
    // receiver reads this piece itself, and we stop offering.
    help_peer_ = false;
    KOLO_LOG(debug, "shm: writing into " << who() << "'s memory failed (" << transport::errno_text(errno)
                                         << "); it reads our large messages alone");
    out_.ctl->help_returned.store(piece + 1, std::memory_order_release);
  }
  notify_receiver();  // it may sleep until the message is complete
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

void ShmPair::offer_help(const char* dst) {
  RingControl& c = *in_.ctl;
  c.help_dst = reinterpret_cast<uint64_t>(dst);
  c.help_done_bytes.store(0, std::memory_order_relaxed);
  c.help_returned.store(0, std::memory_order_relaxed);
  // Names the message (the next one to be counted in cma_done); publishes the fields above.
  c.help_claim.store(help_claim_of((remote_done_ + 1) & kPieceMask, 0), std::memory_order_release);
}

bool ShmPair::pump_remote_read() {
  RecvOp& op = recvs_.front();
  RingControl& c = *in_.ctl;
  const uint64_t pieces = pieces_of(op.bytes);
  uint64_t piece = 0;
  if (const uint64_t back = c.help_returned.load(std::memory_order_acquire); back != 0) {
    c.help_returned.store(0, std::memory_order_relaxed);
    piece = back - 1;  // one the sender claimed and could not write
    remote_returned_ += piece_len(op.bytes, piece);
  } else if (claim_piece(c.help_claim, remote_done_ + 1, pieces, &piece)) {
    remote_claimed_ += piece_len(op.bytes, piece);
  } else {
    // Every piece is taken: the message is in once the sender's pieces are (it writes each one
    // right after claiming it), or read before and held back by the sender's abort flag.
    if (remote_got_ + c.help_done_bytes.load(std::memory_order_acquire) < op.bytes) return false;
    finish_remote_read();
    return in_state_ != In::read_remote;
  }
  const size_t off = static_cast<size_t>(piece) * kRemotePieceBytes, len = piece_len(op.bytes, piece);
  for (size_t got = 0; got < len;) {
    iovec local{op.buf + off + got, len - got};
    iovec remote{reinterpret_cast<void*>(remote_addr_ + off + got), len - got};
    const ssize_t n = ::process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    const int e = n < 0 ? errno : EIO;
    if (e == EINTR) continue;
    // The sender may have aborted (its memory going away) or died: its socket tells which.
    read_socket();
    if (failed_) return true;
    if (e == ESRCH)
      fail(Failure::peer_closed, who() + " died while this rank was reading its message (process gone)");
    else
      fail(Failure::io_error, "reading a message of " + std::to_string(op.bytes) + " bytes from " + who() +
                                  " with process_vm_readv failed: " + transport::errno_text(e));
    return true;
  }
  remote_got_ += len;
  const size_t in = remote_got_ + c.help_done_bytes.load(std::memory_order_acquire);
  op.req->transferred = in;
  if (in == op.bytes) finish_remote_read();
  return true;
}

void ShmPair::stop_help() {
  if (in_state_ != In::read_remote || recvs_.empty()) return;
  RingControl& c = *in_.ctl;
  const size_t bytes = recvs_.front().bytes;
  const uint64_t message = (remote_done_ + 1) & kPieceMask;
  // No more claims: the claim names the message with every piece taken.
  const uint64_t was = c.help_claim.exchange(help_claim_of(message, kPieceMask), std::memory_order_acq_rel);
  const uint64_t taken = (was >> 32) == message ? std::min<uint64_t>(was & kPieceMask, pieces_of(bytes)) : 0;
  const size_t taken_bytes = std::min(bytes, static_cast<size_t>(taken) * kRemotePieceBytes);
  const size_t senders = taken_bytes - remote_claimed_;  // bytes of the pieces the sender claimed
  // It writes a piece right after claiming it (a millisecond per MiB at worst): wait for those
  // to be written or handed back before the user may reuse the buffer. Bounded: a sender that
  // died mid-piece writes nothing more.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    const uint64_t back = c.help_returned.load(std::memory_order_acquire);
    const size_t settled = c.help_done_bytes.load(std::memory_order_acquire) + remote_returned_ +
                           (back != 0 ? piece_len(bytes, back - 1) : 0);
    if (settled >= senders) return;
    // A sender whose socket closed has exited (or aborted, after its last piece): it writes no more.
    pollfd p{sock_.get(), POLLRDHUP, 0};
    if (!sock_.valid() || (::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)) return;
    if (std::chrono::steady_clock::now() > until) {
      KOLO_LOG(warn, "shm: " << who() << " did not finish writing its piece of a message this rank stopped reading");
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void ShmPair::finish_remote_read() {
  // A sender that aborted may have let its buffer go while we read it. It sets this flag after
  // sending its abort notice and before its abort returns, so if the flag is clear now the
  // buffer was intact during the whole read. If it is set, the notice decides the outcome.
  if (in_.ctl->sender_aborted.load(std::memory_order_seq_cst) != 0) {
    read_socket();
    return;  // failed by the notice or the hang-up; otherwise check again on the next poll
  }
  complete_first_recv();
  in_state_ = In::idle;
  in_.ctl->cma_done.store(++remote_done_, std::memory_order_release);
  freed_ = true;  // the sender may sleep until this count moves
}

// ---- control socket ----

bool ShmPair::read_socket() {
  if (failed_ || gone_ || hung_up_) return false;
  bool changed = false;
  char buf[1 + kMaxAbortReason];
  bool reset_seen = false;
  for (;;) {
    ssize_t n = ::recv(sock_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      switch (static_cast<Control>(buf[0])) {
        case Control::doorbell: break;
        case Control::bye:
          bye_received_ = true;
          changed = true;
          break;
        case Control::abort:
          peer_failed_us_ = true;
          fail(Failure::peer_aborted, n > 1 ? std::string(buf + 1, static_cast<size_t>(n - 1)) : "(no reason given)");
          return true;
        default:
          fail(Failure::io_error, "unexpected control record from " + who());
          return true;
      }
      continue;
    }
    if (n < 0 && errno == ECONNRESET && !reset_seen) {
      // A peer that closed with unread records in its own socket (our doorbells) makes the
      // kernel report ECONNRESET once, ahead of what the peer had sent before closing, which is
      // still queued: its abort notice, whose reason this rank must report rather than "closed
      // unexpectedly" (seen under load: a MismatchError's partner reported a dead peer instead).
      // Read on: the queue ends in its records, then end of file.
      reset_seen = true;
      continue;
    }
    if (n == 0 || errno == ECONNRESET) {
      handle_hangup();
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return changed;
    fail(Failure::io_error, "control socket of " + who() + ": " + transport::errno_text(errno));
    return true;
  }
}

void ShmPair::handle_hangup() {
  // Also guards against re-entry: delivering what is left may read the socket again.
  if (failed_ || gone_ || hung_up_) return;
  hung_up_ = true;
  forget_socket();  // a hung-up socket stays readable: keep it out of the sleep set
  // Whatever the peer published before it went is complete in the ring: deliver it first.
  pump_recvs();
  if (failed_) return;
  peer_failed_us_ = true;
  if (!bye_received_) {
    fail(Failure::peer_closed,
         "connection to " + who() + " closed unexpectedly (process died or was killed?)");
    return;
  }
  if (!recvs_.empty() || in_state_ != In::idle || !sends_.empty() || !described_.empty()) {
    fail(Failure::peer_closed, who() + " shut down while this rank still expected data from it");
    return;
  }
  gone_ = true;  // an orderly goodbye: nothing more will come, and nothing is missing
}

bool ShmPair::set_waiting(bool on) {
  if (failed_ || gone_) on = false;
  // Awake again: a waiting any-source receive peeks anew (and so asks again) before it sleeps.
  if (!on) peek_wanted_ = false;
  bool want_in = on && wants_inbound();
  bool want_out = on && wants_outbound();
  // A flag we want set is stored even if we set it before: the peer clears it when it rings
  // (exchange), so our copy may say "set" while the shared flag is clear, and a sleep on that
  // would wait for a doorbell that never comes (seen as 50 ms stalls at 4 ranks).
  if (want_in != waiting_in_ || want_in) {
    in_.ctl->receiver_waiting.store(want_in ? 1 : 0, std::memory_order_seq_cst);
    waiting_in_ = want_in;
  }
  if (want_out != waiting_out_ || want_out) {
    out_.ctl->sender_waiting.store(want_out ? 1 : 0, std::memory_order_seq_cst);
    waiting_out_ = want_out;
  }
  return want_in || want_out;
}

void ShmPair::try_send_bye() {
  if (bye_sent_ || failed_ || gone_ || !sends_.empty() || !described_.empty()) return;
  // Everything we sent is in the ring (or read) by now, so the goodbye cannot overtake it.
  char c = static_cast<char>(Control::bye);
  ssize_t w = ::send(sock_.get(), &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (w == 1) bye_sent_ = true;
  else if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) handle_hangup();
}

void ShmPair::shutdown_socket() {
  forget_socket();
  if (sock_.valid()) ::shutdown(sock_.get(), SHUT_RDWR);
}

void ShmPair::forget_socket() {
  if (!in_epoll_) return;
  in_epoll_ = false;
  dev_->forget_socket(sock_.get());
}

// ---- failures ----

void ShmPair::on_fail() {
  // Before our described sends fail (and their buffers may be reused): a peer still reading one
  // must not take what it reads for the message.
  out_.ctl->sender_aborted.store(1, std::memory_order_seq_cst);
  set_waiting(false);
  forget_socket();
}

void ShmPair::fail_held(Failure why, const std::string& detail) {
  stop_help();
  for (size_t i = 0; i < described_.size(); ++i)
    if (Request* r = described_[i].req; r->state == Request::State::pending) r->fail(why, detail);
  described_.clear();
  in_state_ = In::idle;
}

void ShmPair::send_abort_notice(const std::string& reason) {
  // Non-blocking; a full socket means the peer stopped reading, and it sees the shutdown.
  std::string rec(1, static_cast<char>(Control::abort));
  rec += reason.substr(0, kMaxAbortReason);
  notice_whole_ = ::send(sock_.get(), rec.data(), rec.size(), MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(rec.size());
}

void ShmPair::after_abort() {
  // After the notice: a peer that sees the flag finds the notice on the socket.
  out_.ctl->sender_aborted.store(1, std::memory_order_seq_cst);
  set_waiting(false);
  forget_socket();
  // The peer learns of the abort from the notice; one that could not go (a full socket) is told
  // by the end of the stream instead, and the pair cannot be handed over. Otherwise the socket
  // stays open for a hand-over (reusable()).
  if (abort_sent_ && !notice_whole_) {
    sock_shut_ = true;
    ::shutdown(sock_.get(), SHUT_WR);
  }
}

// ---- hand-over ----

void ShmPair::begin_resync(uint64_t token, int rank, int size, int expect_rank) {
  resync_ = Resync{};
  resync_.kind = static_cast<char>(Control::resync);
  resync_.token = token;
  resync_.rank = rank;
  resync_.size = size;
  resync_.cut = next_out_;  // nothing more is published for the old group
  resync_.described = described_count_;
  resync_sent_ = resync_got_ = false;
  resync_expect_ = expect_rank;
  // Our abort flag stays up until the peer's record comes (resync_step): the peer may still be
  // in the old group, reading one of our described messages whose buffer is the user's again.
}

bool ShmPair::resync_step() {
  if (!resync_sent_) {
    const ssize_t w = ::send(sock_.get(), &resync_, sizeof resync_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w == static_cast<ssize_t>(sizeof resync_)) {
      resync_sent_ = true;
    } else if (!(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) {
      throw Error(w < 0 && (errno == EPIPE || errno == ECONNRESET) ? "the connection closed (process died or was killed?)"
                                                                   : "send: " + transport::errno_text(errno));
    }
  }
  char buf[1 + kMaxAbortReason];
  while (!resync_got_) {
    const ssize_t n = ::recv(sock_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) throw Error(n == 0 || errno == ECONNRESET ? "the connection closed (process died or was killed?)"
                                                          : "recv: " + transport::errno_text(errno));
    const auto kind = static_cast<Control>(buf[0]);
    if (kind == Control::doorbell || kind == Control::bye || kind == Control::abort) continue;  // the old group's
    Resync r{};
    if (kind != Control::resync || static_cast<size_t>(n) != sizeof r) throw Error("unexpected control record before its hand-over record");
    std::memcpy(&r, buf, sizeof r);
    if (r.token != resync_.token || r.rank != resync_expect_ || r.size != resync_.size)
      throw Error("its hand-over record names another group (a different shrink or grow?)");
    if (r.cut < next_in_ || r.cut - next_in_ > uint64_t(1) << 40 || r.described < remote_done_)
      throw Error("its hand-over record is inconsistent with the ring");
    // Every slot use before the cut is the old group's: skipped unread, and freed for the sender.
    // Slot use k is published as k + 1, so a stale slot never looks like a new one.
    next_in_ = r.cut;
    in_.ctl->tail.store(next_in_, std::memory_order_release);
    remote_done_ = r.described;
    in_.ctl->cma_done.store(remote_done_, std::memory_order_release);
    in_state_ = In::idle;
    left_ = 0;
    dst_ = nullptr;
    resync_got_ = true;
    // The peer sent its record after its abort, which ended its reads of the old group (a read
    // finishing before then saw our flag and failed): only now may the flag drop, so that the
    // new group's messages, described after this, do not look aborted.
    out_.ctl->sender_aborted.store(0, std::memory_order_seq_cst);
  }
  return resync_sent_ && resync_got_;
}

void ShmPair::finish_resync(ShmDevice* dev, int peer, transport::FailureSink* sink) {
  rearm(peer, sink);
  dev_ = dev;
  bye_sent_ = false;
  notice_whole_ = false;
  waiting_in_ = waiting_out_ = false;
  in_epoll_ = true;  // the new device watches the socket
  // The peer's new sends may already wait for the slots our cut freed.
  notify_sender();
}

}  // namespace kolo::shm

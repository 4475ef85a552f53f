#include "transports/tcp/tcp_pair.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kolo/error.hpp"

namespace kolo::tcp {

using transport::Failure;
using transport::Request;
using transport::Tag;

namespace {
constexpr size_t kInbufBytes = 64 * 1024;
// Payload pieces at least this large are read straight into the destination, skipping the
// read-ahead buffer (one copy less); smaller ones ride along with the next headers.
constexpr size_t kDirectReadBytes = 16 * 1024;

FrameHeader header_of(uint8_t kind, size_t bytes, const Tag& tag) {
  FrameHeader h{};
  h.kind = kind == 0 ? FrameKind::data : static_cast<FrameKind>(kind);
  h.bytes = bytes;
  std::memcpy(h.tag, tag.w, sizeof h.tag);
  return h;
}
}  // namespace

TcpPair::TcpPair(transport::FailureSink* sink, int peer, Fd fd, std::unique_ptr<TlsSession> tls)
    : PairBase(peer, sink), fd_(std::move(fd)), tls_(std::move(tls)), inbuf_(new char[kInbufBytes]) {
  if (tls_) {
    tls_send_ = tls_recv_ = true;
    if (!tls_->handshaking()) tls_ready(false);
  }
}

// Called once the TLS handshake is done: a direction the kernel seals (kTLS) goes back to plain
// sendmsg/recv. A send that met the unfinished handshake waits for no epoll event (the socket
// never filled), so the read that finished the handshake starts it; and the next progress reads.
void TcpPair::tls_ready(bool from_read) {
  tls_send_ = !tls_->kernel_sends();
  tls_recv_ = !tls_->kernel_receives();
  // OpenSSL may hold records it read ahead during the handshake, which no epoll edge announces.
  writable_ = readable_ = true;
  if (from_read && !sends_.empty() && !failed_) pump_write();
}

// The callers read errno after these, as after sendmsg/recv: tls_ready() (which may send) must
// not change it.
ssize_t TcpPair::tls_sendv(iovec* iov, int n) {
  const bool was = tls_->handshaking();
  const ssize_t w = tls_->writev(iov, n);
  if (was && !tls_->handshaking()) {
    const int err = errno;
    tls_ready(false);
    errno = err;
  }
  return w;
}

ssize_t TcpPair::tls_recv(void* buf, size_t len) {
  const bool was = tls_->handshaking();
  const ssize_t r = tls_->read(buf, len);
  if (was && !tls_->handshaking()) {
    const int err = errno;
    tls_ready(true);
    errno = err;
  }
  return r;
}

std::string TcpPair::io_error(int err) const {
  // A TLS failure (handshake, tampered or cut record) says what and names the address.
  if (tls_ && !tls_->error().empty()) return tls_->error();
  return errno_text(err);
}

TcpPair::~TcpPair() = default;

void TcpPair::on_send_posted() {
  // Try at once: a small message usually leaves in this call, with no trip through epoll.
  if (sends_.size() == 1 && writable_) pump_write();
}

void TcpPair::on_recv_posted() {
  if (parked_) {
    if (match_parked()) pump_read();
  } else if (recvs_.size() == 1) {
    pump_read();
  }
}

bool TcpPair::peek_header(Tag* tag, uint64_t* bytes) const {
  if (!parked_ || rstate_ != ReadState::header) return false;
  std::memcpy(tag->w, cur_.tag, sizeof tag->w);
  *bytes = cur_.bytes;
  return true;
}

void TcpPair::mark(bool readable, bool writable, bool hangup) {
  readable_ |= readable;
  writable_ |= writable;
  hangup_ |= hangup;
}

bool TcpPair::progress() {
  if (failed_ || gone_) {
    if (!notice_after_handshake_.empty()) [[unlikely]] finish_abort_notice();
    return false;
  }
  bool moved = false;
  if (writable_ && !sends_.empty()) moved |= pump_write();
  if (readable_ && !failed_) moved |= pump_read();
  if (hangup_ && !failed_) {
    handle_hangup();
    moved = true;
  }
  return moved;
}

bool TcpPair::pump_write() {
  bool moved = false;
  while (!sends_.empty() && !failed_) {
    SendOp& op = sends_.front();
    iovec iov[2];
    int n = 0;
    const size_t hdr_bytes = sizeof(FrameHeader);
    FrameHeader hdr = header_of(op.kind, op.bytes, op.tag);  // rebuilt, not stored: 16 bytes less per op
    if (op.done < hdr_bytes) {
      iov[n].iov_base = reinterpret_cast<char*>(&hdr) + op.done;
      iov[n].iov_len = hdr_bytes - op.done;
      ++n;
    }
    size_t payload_sent = op.done > hdr_bytes ? op.done - hdr_bytes : 0;
    if (op.bytes > payload_sent) {
      iov[n].iov_base = const_cast<char*>(op.buf) + payload_sent;
      iov[n].iov_len = op.bytes - payload_sent;
      ++n;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = tls_send_ ? tls_sendv(iov, n) : ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        writable_ = false;
        return moved;
      }
      if (errno == EPIPE || errno == ECONNRESET) {
        if (!in_hangup_) handle_hangup();
        if (!failed_) fail(Failure::peer_closed, "connection to " + who() + " was closed while sending to it");
        return true;
      }
      return fail(Failure::io_error, "send to " + who() + ": " + io_error(errno));
    }
    op.done += static_cast<size_t>(w);
    if (op.req) op.req->transferred = op.done > hdr_bytes ? op.done - hdr_bytes : 0;
    if (op.done == hdr_bytes + op.bytes) {
      complete_first_send();
      moved = true;
    }
  }
  return moved;
}

size_t TcpPair::fill_inbuf() {
  if (in_pos_ == in_end_) in_pos_ = in_end_ = 0;
  if (in_pos_ > 0 && in_end_ + sizeof(FrameHeader) > kInbufBytes) {
    std::memmove(inbuf_.get(), inbuf_.get() + in_pos_, in_end_ - in_pos_);
    in_end_ -= in_pos_;
    in_pos_ = 0;
  }
  size_t room = kInbufBytes - in_end_;
  if (room == 0) return 0;
  for (;;) {
    ssize_t r = tls_recv_ ? tls_recv(inbuf_.get() + in_end_, room) : ::recv(fd_.get(), inbuf_.get() + in_end_, room, MSG_DONTWAIT);
    if (r > 0) {
      in_end_ += static_cast<size_t>(r);
      // A short read drained the socket: the next byte to arrive raises a new edge-triggered
      // event, so asking again now would only return EAGAIN (a system call per message). While
      // the connection ends, read until EAGAIN or EOF instead.
      if (static_cast<size_t>(r) < room && !in_hangup_) readable_ = false;
      return static_cast<size_t>(r);
    }
    if (r == 0) {
      eof_ = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      readable_ = false;
      return 0;
    }
    if (errno == ECONNRESET) {
      eof_ = true;
      return 0;
    }
    fail(Failure::io_error, "recv from " + who() + ": " + io_error(errno));
    return 0;
  }
}

bool TcpPair::pump_read() {
  bool moved = false;
  for (;;) {
    if (failed_) return moved;
    if (rstate_ == ReadState::header) {
      if (parked_) return moved;
      size_t avail = in_end_ - in_pos_;
      size_t need = sizeof(FrameHeader) - hdr_got_;
      size_t take = std::min(avail, need);
      std::memcpy(reinterpret_cast<char*>(&cur_) + hdr_got_, inbuf_.get() + in_pos_, take);
      in_pos_ += take;
      hdr_got_ += take;
      if (hdr_got_ < sizeof(FrameHeader)) {
        // Nothing to read for: stay quiet unless a receive waits or the peer may send control frames.
        if (!readable_ || fill_inbuf() == 0) {
          if (eof_ && !in_hangup_) handle_hangup();
          return moved;
        }
        continue;
      }
      hdr_got_ = 0;
      moved |= start_frame();
      continue;
    }
    // A payload (data, abort reason, or bytes being discarded).
    size_t avail = in_end_ - in_pos_;
    if (avail > 0) {
      size_t take = std::min(avail, left_);
      if (rstate_ == ReadState::payload) std::memcpy(dst_, inbuf_.get() + in_pos_, take);
      if (rstate_ == ReadState::abort_reason) abort_reason_.append(inbuf_.get() + in_pos_, take);
      if (rstate_ == ReadState::payload) dst_ += take;
      in_pos_ += take;
      left_ -= take;
    } else if (left_ >= kDirectReadBytes && rstate_ == ReadState::payload) {
      if (!readable_) return moved;
      ssize_t r = tls_recv_ ? tls_recv(dst_, left_) : ::recv(fd_.get(), dst_, left_, MSG_DONTWAIT);
      if (r > 0) {
        if (static_cast<size_t>(r) < left_ && !in_hangup_) readable_ = false;  // drained (fill_inbuf)
        dst_ += r;
        left_ -= static_cast<size_t>(r);
      } else if (r == 0 || (r < 0 && errno == ECONNRESET)) {
        eof_ = true;
        if (!in_hangup_) handle_hangup();
        return true;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        readable_ = false;
        return moved;
      } else if (errno != EINTR) {
        return fail(Failure::io_error, "recv from " + who() + ": " + io_error(errno));
      }
    } else if (left_ > 0) {
      if (!readable_ || fill_inbuf() == 0) {
        if (eof_ && !in_hangup_) handle_hangup();
        return moved;
      }
      continue;
    }
    if (rstate_ == ReadState::payload && !recvs_.empty()) {
      Request* req = recvs_.front().req;
      req->transferred = req->bytes - left_;
    }
    if (left_ > 0) continue;
    // Frame finished.
    if (rstate_ == ReadState::payload) {
      complete_first_recv();
      moved = true;
    } else if (rstate_ == ReadState::abort_reason) {
      rstate_ = ReadState::header;
      return fail(Failure::peer_aborted, abort_reason_);
    }
    rstate_ = ReadState::header;
  }
}

bool TcpPair::start_frame() {
  switch (cur_.kind) {
    case FrameKind::bye:
      bye_received_ = true;
      return true;
    case FrameKind::abort:
      abort_reason_.clear();
      left_ = std::min<uint64_t>(cur_.bytes, kMaxAbortReason);
      rstate_ = left_ > 0 ? ReadState::abort_reason : ReadState::header;
      if (left_ == 0) return fail(Failure::peer_aborted, "(no reason given)");
      return false;
    case FrameKind::data:
      if (closing_ && recvs_.empty()) {
        // The peer sent a message nobody will receive: a program error on some rank, but the
        // goodbye must still get through, so skip it.
        left_ = cur_.bytes;
        rstate_ = left_ > 0 ? ReadState::discard : ReadState::header;
        return false;
      }
      parked_ = true;
      return match_parked();
    case FrameKind::resync:
      break;  // only a hand-over reads it (resync_step): here it is a corrupt stream
  }
  return fail(Failure::io_error, "corrupt frame from " + who() + " (kind " +
                                     std::to_string(static_cast<uint32_t>(cur_.kind)) + ")");
}

bool TcpPair::match_parked() {
  if (recvs_.empty()) return false;
  parked_ = false;
  Tag got;
  std::memcpy(got.w, cur_.tag, sizeof got.w);
  if (!match_first_recv(got, cur_.bytes)) {
    // The pair failed; its payload is still on the stream: a hand-over drops it (resync_step).
    left_ = cur_.bytes;
    rstate_ = left_ > 0 ? ReadState::discard : ReadState::header;
    return true;
  }
  RecvOp& op = recvs_.front();
  dst_ = op.buf;
  left_ = op.bytes;
  rstate_ = ReadState::payload;
  if (left_ == 0) {
    complete_first_recv();
    rstate_ = ReadState::header;
  }
  return true;
}

void TcpPair::handle_hangup() {
  hangup_ = false;
  if (failed_ || gone_) return;
  in_hangup_ = true;
  // Read what the peer left behind: an abort notice or a goodbye may be in it.
  closing_ = true;
  readable_ = true;
  for (int i = 0; i < 4096 && !failed_ && !eof_; ++i) {
    if (rstate_ == ReadState::header && parked_) {
      // Data nobody waits for yet: the peer is gone, skip it to reach a possible abort notice.
      parked_ = false;
      left_ = cur_.bytes;
      rstate_ = left_ > 0 ? ReadState::discard : ReadState::header;
    }
    size_t before = in_pos_;
    bool moved = pump_read();
    if (!moved && before == in_pos_ && !readable_) break;
  }
  in_hangup_ = false;
  if (failed_) return;
  if (bye_received_ && recvs_.empty()) {
    // An orderly goodbye: nothing more will come from this peer.
    gone_ = true;
    return;
  }
  fail(Failure::peer_closed, bye_received_ ? who() + " shut down while this rank still expected data from it"
                                           : "connection to " + who() + " closed unexpectedly (process died or was killed?)");
}

void TcpPair::fail_held(Failure, const std::string&) {
  // A frame cut off halfway leaves the outgoing stream unusable for any further frame.
  if (!sends_.empty() && sends_.front().done > 0) out_broken_ = true;
}

bool TcpPair::discard_until_eof() {
  // The TLS handshake's bytes are not to be dropped while an abort notice waits for it.
  if (!notice_after_handshake_.empty() && !finish_abort_notice()) return false;
  char sink[16384];
  for (;;) {
    ssize_t r = ::recv(fd_.get(), sink, sizeof sink, MSG_DONTWAIT);
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    return !(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }
}

void TcpPair::queue_bye() {
  if (failed_) return;
  sends_.push_back(SendOp{nullptr, 0, 0, Tag{}, nullptr, static_cast<uint8_t>(FrameKind::bye)});
  if (sends_.size() == 1 && writable_) pump_write();
}

void TcpPair::send_abort_notice(const std::string& reason) {
  if (out_broken_) return;
  FrameHeader hdr{};
  hdr.kind = FrameKind::abort;
  std::string r = reason.substr(0, kMaxAbortReason);
  hdr.bytes = r.size();
  iovec iov[2] = {{&hdr, sizeof hdr}, {r.data(), r.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  // Best effort and non-blocking: the notice is tiny, so it fits unless the peer stopped reading.
  // Over TLS it is one record, unless a record is half sent. A connection made after the abort
  // (lazily) may still be in its TLS handshake: the notice then waits for it, which the device's
  // polls finish (finish_abort_notice), so that the peer learns why instead of seeing a close.
  if (tls_ && tls_->handshaking()) {
    notice_after_handshake_ = reason;
    return;
  }
  if (tls_send_) {
    if (!tls_->write_pending()) (void)tls_->writev(iov, 2);
    return;
  }
  const ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  notice_whole_ = w == static_cast<ssize_t>(sizeof hdr + r.size());
  if (w > 0 && !notice_whole_) out_broken_ = true;  // a notice cut off: no frame may follow
}

void TcpPair::after_abort() {
  if (!notice_after_handshake_.empty()) return;
  // The peer learns of the abort from the notice; where it could not go (a frame of ours cut off
  // halfway, a full socket) or over TLS, the end of the stream tells it instead, and the
  // connection cannot be handed over. Otherwise it stays open for a hand-over (reusable()).
  if (tls_ || out_broken_ || (abort_sent_ && !notice_whole_)) shut_write();
}

void TcpPair::shut_write() {
  if (shut_wr_ || !fd_.valid()) return;
  shut_wr_ = true;
  ::shutdown(fd_.get(), SHUT_WR);
}

bool TcpPair::reusable() const {
  return failure_keeps_connection() && fd_.valid() && !tls_ && !shut_wr_ && !out_broken_ && !eof_ && !hangup_ &&
         notice_after_handshake_.empty();
}

void TcpPair::begin_resync(const Tag& mine, const Tag& expect) {
  marker_ = header_of(static_cast<uint8_t>(FrameKind::resync), 0, mine);
  marker_sent_ = 0;
  expect_ = expect;
  marker_got_ = false;
  drop_partial_frame();
}

void TcpPair::drop_partial_frame() {
  // What the reader was in the middle of belongs to the old group: drop the rest of it whole.
  if (rstate_ == ReadState::payload || rstate_ == ReadState::abort_reason) {
    rstate_ = left_ > 0 ? ReadState::discard : ReadState::header;
  } else if (rstate_ == ReadState::header && parked_) {
    parked_ = false;
    left_ = cur_.bytes;
    rstate_ = left_ > 0 ? ReadState::discard : ReadState::header;
  }
  dst_ = nullptr;
}

size_t TcpPair::resync_recv() {
  if (in_pos_ == in_end_) in_pos_ = in_end_ = 0;
  if (in_pos_ > 0 && in_end_ + sizeof(FrameHeader) > kInbufBytes) {
    std::memmove(inbuf_.get(), inbuf_.get() + in_pos_, in_end_ - in_pos_);
    in_end_ -= in_pos_;
    in_pos_ = 0;
  }
  for (;;) {
    const ssize_t r = ::recv(fd_.get(), inbuf_.get() + in_end_, kInbufBytes - in_end_, MSG_DONTWAIT);
    if (r > 0) {
      in_end_ += static_cast<size_t>(r);
      return static_cast<size_t>(r);
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    eof_ = true;
    throw Error(r == 0 || errno == ECONNRESET ? "the connection closed (process died or was killed?)"
                                              : "recv: " + errno_text(errno));
  }
}

bool TcpPair::resync_step() {
  while (marker_sent_ < sizeof marker_) {
    const ssize_t w = ::send(fd_.get(), reinterpret_cast<const char*>(&marker_) + marker_sent_, sizeof marker_ - marker_sent_,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      marker_sent_ += static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;  // the peer drains our old bytes meanwhile
    } else {
      throw Error("send: " + errno_text(errno));
    }
  }
  while (!marker_got_ && drop_until(FrameKind::resync)) {
    Tag got;
    std::memcpy(got.w, cur_.tag, sizeof got.w);
    if (!(got == expect_) || cur_.bytes != 0) throw Error("its hand-over marker names another group (a different shrink or grow?)");
    marker_got_ = true;
  }
  return marker_got_ && marker_sent_ == sizeof marker_;
}

bool TcpPair::drop_until(FrameKind kind) {
  for (;;) {
    if (rstate_ == ReadState::header) {
      const size_t take = std::min(in_end_ - in_pos_, sizeof(FrameHeader) - hdr_got_);
      std::memcpy(reinterpret_cast<char*>(&cur_) + hdr_got_, inbuf_.get() + in_pos_, take);
      in_pos_ += take;
      hdr_got_ += take;
      if (hdr_got_ < sizeof(FrameHeader)) {
        if (resync_recv() == 0) return false;
        continue;
      }
      hdr_got_ = 0;
      if (cur_.kind == kind) return true;
      switch (cur_.kind) {
        case FrameKind::data:
        case FrameKind::abort:
          left_ = cur_.bytes;
          rstate_ = left_ > 0 ? ReadState::discard : ReadState::header;
          break;
        case FrameKind::bye:
          break;
        default:
          throw Error("corrupt frame (kind " + std::to_string(static_cast<uint32_t>(cur_.kind)) + ")");
      }
      continue;
    }
    // The rest of an old frame: dropped.
    const size_t take = std::min(in_end_ - in_pos_, left_);
    in_pos_ += take;
    left_ -= take;
    if (left_ == 0) {
      rstate_ = ReadState::header;
      continue;
    }
    if (resync_recv() == 0) return false;
  }
}

bool TcpPair::linger_done() {
  if (!notice_after_handshake_.empty() && !finish_abort_notice()) return false;
  // A stream whose frames this side can no longer follow: wait for its end, as before.
  if (tls_ || eof_ || !failure_keeps_connection()) return discard_until_eof();
  // The peer's abort notice came: it sends nothing after it.
  if (failure_ == Failure::peer_aborted) {
    (void)discard_until_eof();
    return true;
  }
  try {
    drop_partial_frame();
    return drop_until(FrameKind::abort);  // its notice: it has stopped sending
  } catch (const Error&) {
    return true;  // the end of its stream
  }
}

void TcpPair::finish_resync(int peer, transport::FailureSink* sink) {
  rearm(peer, sink);
  rstate_ = ReadState::header;
  hdr_got_ = 0;
  parked_ = false;
  left_ = 0;
  dst_ = nullptr;
  abort_reason_.clear();
  // Look at the socket at once: the peer's first messages of the new group may be here already
  // (some in the read-ahead buffer), and its new epoll set reports only what comes next.
  readable_ = writable_ = true;
  hangup_ = eof_ = in_hangup_ = out_broken_ = notice_whole_ = false;
}

bool TcpPair::finish_abort_notice() {
  const TlsSession::Step s = tls_->handshake();
  if (s == TlsSession::Step::want_read || s == TlsSession::Step::want_write) return false;
  const std::string reason = std::move(notice_after_handshake_);
  notice_after_handshake_.clear();
  if (s == TlsSession::Step::done) {
    tls_ready(false);
    send_abort_notice(reason);
  }
  ::shutdown(fd_.get(), SHUT_WR);
  return true;
}

}  // namespace kolo::tcp

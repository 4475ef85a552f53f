#include "transports/tcp/tcp_pair.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transports/tcp/tcp_device.hpp"

namespace kolo::tcp {

using transport::Failure;
using transport::Request;
using transport::Tag;

namespace {
constexpr size_t kInbufBytes = 64 * 1024;
// Payload pieces at least this large are read straight into the destination, skipping the
// read-ahead buffer (one copy less); smaller ones ride along with the next headers.
constexpr size_t kDirectReadBytes = 16 * 1024;

void complete(Request* r) { r->state = Request::State::done; }
}  // namespace

TcpPair::TcpPair(TcpDevice* dev, int peer, Fd fd)
    : dev_(dev), peer_(peer), fd_(std::move(fd)), inbuf_(new char[kInbufBytes]) {}

TcpPair::~TcpPair() = default;

bool TcpPair::refuse_if_closed(Request* req) const {
  if (!failed_ && !gone_) return false;
  req->fail(failed_ ? Failure::aborted : Failure::peer_closed,
            "connection to rank " + std::to_string(peer_) + (failed_ ? " already failed" : " was closed by the peer"));
  return true;
}

void TcpPair::post_send(const void* buf, size_t bytes, const Tag& tag, Request* req) {
  req->start(peer_, true, tag, bytes);
  if (refuse_if_closed(req)) return;
  SendOp op{};
  op.hdr.kind = FrameKind::data;
  op.hdr.bytes = bytes;
  std::memcpy(op.hdr.tag, tag.w, sizeof op.hdr.tag);
  op.buf = static_cast<const char*>(buf);
  op.bytes = bytes;
  op.req = req;
  sends_.push_back(std::move(op));
  // Try at once: a small message usually leaves in this call, with no trip through epoll.
  if (sends_.size() == 1 && writable_) pump_write();
}

void TcpPair::post_recv(void* buf, size_t bytes, const Tag& tag, Request* req) {
  req->start(peer_, false, tag, bytes);
  if (refuse_if_closed(req)) return;
  recvs_.push_back(RecvOp{static_cast<char*>(buf), bytes, tag, req});
  if (parked_) {
    if (match_parked()) pump_read();
  } else if (recvs_.size() == 1) {
    pump_read();
  }
}

void TcpPair::mark(bool readable, bool writable, bool hangup) {
  readable_ |= readable;
  writable_ |= writable;
  hangup_ |= hangup;
}

bool TcpPair::progress() {
  if (failed_ || gone_) return false;
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
    if (op.sent < hdr_bytes) {
      iov[n].iov_base = reinterpret_cast<char*>(&op.hdr) + op.sent;
      iov[n].iov_len = hdr_bytes - op.sent;
      ++n;
    }
    size_t payload_sent = op.sent > hdr_bytes ? op.sent - hdr_bytes : 0;
    if (op.bytes > payload_sent) {
      iov[n].iov_base = const_cast<char*>(op.buf) + payload_sent;
      iov[n].iov_len = op.bytes - payload_sent;
      ++n;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        writable_ = false;
        return moved;
      }
      if (errno == EPIPE || errno == ECONNRESET) {
        if (!in_hangup_) handle_hangup();
        if (!failed_) fail(Failure::peer_closed, "connection to rank " + std::to_string(peer_) + " was closed while sending to it");
        return true;
      }
      return fail(Failure::io_error, "send to rank " + std::to_string(peer_) + ": " + errno_text(errno));
    }
    op.sent += static_cast<size_t>(w);
    if (op.req) op.req->transferred = op.sent > hdr_bytes ? op.sent - hdr_bytes : 0;
    if (op.sent == hdr_bytes + op.bytes) {
      if (op.req) complete(op.req);
      sends_.pop_front();
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
    ssize_t r = ::recv(fd_.get(), inbuf_.get() + in_end_, room, MSG_DONTWAIT);
    if (r > 0) {
      in_end_ += static_cast<size_t>(r);
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
    fail(Failure::io_error, "recv from rank " + std::to_string(peer_) + ": " + errno_text(errno));
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
      ssize_t r = ::recv(fd_.get(), dst_, left_, MSG_DONTWAIT);
      if (r > 0) {
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
        return fail(Failure::io_error, "recv from rank " + std::to_string(peer_) + ": " + errno_text(errno));
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
      complete(recvs_.front().req);
      recvs_.pop_front();
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
  }
  return fail(Failure::io_error, "corrupt frame from rank " + std::to_string(peer_) + " (kind " +
                                     std::to_string(static_cast<uint32_t>(cur_.kind)) + ")");
}

bool TcpPair::match_parked() {
  if (recvs_.empty()) return false;
  parked_ = false;
  RecvOp& op = recvs_.front();
  Tag got;
  std::memcpy(got.w, cur_.tag, sizeof got.w);
  if (!(got == op.tag) || cur_.bytes != op.bytes) {
    op.req->got_tag = got;
    op.req->got_bytes = cur_.bytes;
    Failure why = got == op.tag ? Failure::size_mismatch : Failure::tag_mismatch;
    Request* req = op.req;
    recvs_.pop_front();
    req->state = Request::State::failed;
    req->failure = why;
    req->detail = "message from rank " + std::to_string(peer_) + " does not match the receive";
    return fail(why, req->detail);
  }
  dst_ = op.buf;
  left_ = op.bytes;
  rstate_ = ReadState::payload;
  if (left_ == 0) {
    complete(op.req);
    recvs_.pop_front();
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
  fail(Failure::peer_closed, bye_received_ ? "rank " + std::to_string(peer_) + " shut down while this rank still expected data from it"
                                           : "connection to rank " + std::to_string(peer_) + " closed unexpectedly (process died or was killed?)");
}

void TcpPair::fail_pending(Failure why, const std::string& detail) {
  // A frame cut off halfway leaves the outgoing stream unusable for any further frame.
  if (!sends_.empty() && sends_.front().sent > 0) out_broken_ = true;
  for (auto& op : sends_)
    if (op.req && op.req->state == Request::State::pending) {
      op.req->state = Request::State::failed;
      op.req->failure = why;
      op.req->detail = detail;
    }
  for (auto& op : recvs_)
    if (op.req->state == Request::State::pending) {
      op.req->state = Request::State::failed;
      op.req->failure = why;
      op.req->detail = detail;
    }
  sends_.clear();
  recvs_.clear();
}

bool TcpPair::fail(Failure why, const std::string& detail) {
  if (failed_) return true;
  failed_ = true;
  fail_pending(why, detail);
  dev_->report_failure(peer_, why, detail);
  return true;
}

bool TcpPair::discard_until_eof() {
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
  SendOp op{};
  op.hdr.kind = FrameKind::bye;
  sends_.push_back(std::move(op));
  if (sends_.size() == 1 && writable_) pump_write();
}

void TcpPair::abort(const std::string& reason) {
  // Even a pair that already failed (say, on a mismatched message) gets the notice: its peer is
  // probably alive and should learn why.
  fail_pending(Failure::aborted, reason);
  bool between_frames = !out_broken_;
  failed_ = true;
  if (abort_sent_ || gone_) return;
  abort_sent_ = true;
  if (between_frames) {
    FrameHeader hdr{};
    hdr.kind = FrameKind::abort;
    std::string r = reason.substr(0, kMaxAbortReason);
    hdr.bytes = r.size();
    iovec iov[2] = {{&hdr, sizeof hdr}, {r.data(), r.size()}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    // Best effort and non-blocking: the notice is tiny, so it fits unless the peer stopped reading.
    (void)::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ::shutdown(fd_.get(), SHUT_WR);
}

}  // namespace kolo::tcp

// The shared-memory pair's end of a group (the class: shm_pair.hpp): what it does when it fails
// or aborts (the abort notice, the flag that stops the peer from trusting a read of our reused
// buffers), and the hand-over that may follow (ShmDevice::hand_over, for a shrink): both ends
// exchange a record over the control socket and skip the old group's slots unread, so the pair
// carries on in the new group with nothing in the rings to clear.
#include "transports/shm/shm_pair.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "kolo/error.hpp"

namespace kolo::shm {

using transport::Failure;
using transport::Request;

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

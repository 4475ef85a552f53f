// The shared-memory pair's control socket and sleep flags (the class: shm_pair.hpp): reading
// the socket (doorbells, the goodbye, an abort notice with its reason, the hang-up of a peer that
// died), telling an orderly goodbye from a death, the flags in shared memory that ask the peer
// for a doorbell before this process sleeps, and leaving the device's sleep set.
#include "transports/shm/shm_pair.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "transports/common/seqpacket.hpp"
#include "transports/shm/shm_device.hpp"

namespace kolo::shm {

using transport::Failure;

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
    const int err = errno;
    switch (transport::seqpacket::read_end(n, err, reset_seen)) {
      case transport::seqpacket::ReadEnd::read_on: continue;
      case transport::seqpacket::ReadEnd::hang_up: handle_hangup(); return true;
      case transport::seqpacket::ReadEnd::drained: return changed;
      case transport::seqpacket::ReadEnd::error: break;
    }
    fail(Failure::io_error, "control socket of " + who() + ": " + transport::errno_text(err));
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

}  // namespace kolo::shm

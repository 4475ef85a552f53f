// The shared-memory pair's large messages (the class: shm_pair.hpp): a message at or above the
// cross-memory-attach threshold is only described in a slot, and the receiver reads it straight
// from the sender's memory with process_vm_readv, one piece per poll, into the user's buffer.
// The sender may help (KOLO_SHM_CMA_HELP): it claims pieces of the same message in the ring's
// help_claim and writes them into the receiver's buffer with process_vm_writev. Here: the pieces
// and their claims, both sides' halves, stopping the sender's help before a failed receive hands
// its buffer back, and the sender's abort flag that decides whether a finished read counts.
#include "transports/shm/shm_pair.hpp"

#include <poll.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "common/log.hpp"

namespace kolo::shm {

using transport::Failure;

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

// ---- the sender's help ----

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

// ---- the receiver's read ----

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

}  // namespace kolo::shm

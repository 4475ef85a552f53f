// IpcPair: a message's way between two processes' device memory (see ipc_pair.hpp).
#include "transports/cuda_ipc/ipc_pair.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "transports/common/seqpacket.hpp"
#include "transports/common/setup_text.hpp"

namespace kolo::cuda_ipc {

using transport::Failure;
using transport::Request;
using transport::Tag;

namespace {
constexpr uint64_t kRingAlign = 256;  // every staged message starts aligned as cudaMalloc's blocks do

wire::Record record(wire::Kind kind) {
  wire::Record r{};
  r.kind = static_cast<uint8_t>(kind);
  return r;
}
}  // namespace

IpcPair::IpcPair(int peer, transport::FailureSink* sink, PairShared shared, transport::Fd sock, char* ring,
                 size_t ring_bytes, uint64_t ring_gen)
    : PairBase(peer, sink),
      shared_(shared),
      sock_(std::move(sock)),
      copies_(shared.memory.copy_queue()),
      ring_(ring),
      ring_bytes_(ring_bytes),
      ring_gen_(ring_gen) {
  announced_.reserve(16);
  arrived_.reserve(16);
  out_.reserve(16);
}

IpcPair::~IpcPair() = default;

// ---- posting ----

bool IpcPair::check_device_buffer(const void* buf, size_t bytes, const char* what) {
  if (bytes == 0) return true;
  try {
    const AllocationRange r = shared_.memory.allocation_of(buf);
    if (reinterpret_cast<uintptr_t>(buf) + bytes <= r.base + r.size) return true;
    fail(Failure::io_error, std::string("cuda_ipc: ") + what + " " + who() + " of " + std::to_string(bytes) +
                                " bytes runs past the end of its device allocation");
  } catch (const std::exception& e) {
    fail(Failure::io_error, std::string(what) + " " + who() + ": " + e.what());
  }
  return false;
}

void IpcPair::on_send_posted() {
  const SendOp& op = sends_[sends_.size() - 1];
  if (!check_device_buffer(op.buf, op.bytes, "send to")) return;
  guarded(&IpcPair::pump_sends);
  if (!failed_) flush();
}

void IpcPair::on_recv_posted() {
  const RecvOp& op = recvs_[recvs_.size() - 1];
  if (!check_device_buffer(op.buf, op.bytes, "receive from")) return;
  guarded(&IpcPair::pump_recvs);
  if (!failed_) flush();
}

bool IpcPair::guarded(bool (IpcPair::*pump)()) {
  // A copy the GPU refuses (cudaMemcpyAsync, cudaEventQuery) throws: the pair fails with it,
  // naming the peer, instead of the exception leaving the device's poll().
  try {
    return (this->*pump)();
  } catch (const std::exception& e) {
    return fail(Failure::io_error, "copying a message of " + who() + ": " + e.what());
  }
}

bool IpcPair::peek_header(Tag* tag, uint64_t* bytes) const {
  if (arrived_.empty() || arrived_.front().started) return false;
  *tag = arrived_.front().tag;
  *bytes = arrived_.front().bytes;
  return true;
}

// ---- progress ----

bool IpcPair::progress() {
  if (failed_ || gone_) return false;
  bool changed = read_socket();
  if (!failed_ && !gone_) changed |= guarded(&IpcPair::pump_sends);
  if (!failed_ && !gone_) changed |= guarded(&IpcPair::pump_recvs);
  if (!failed_ && !gone_) changed |= flush();
  return changed;
}

bool IpcPair::ring_reserve(size_t bytes, uint64_t* offset, uint64_t* taken) {
  const uint64_t len = (bytes + kRingAlign - 1) / kRingAlign * kRingAlign;
  if (ring_used_ == 0) ring_head_ = 0;
  // Live messages occupy the ring_used_ bytes before ring_head_ (circularly); a message is
  // contiguous, so one that does not fit before the end takes the rest of the ring as padding.
  if (ring_head_ + len <= ring_bytes_) {
    if (ring_used_ + len > ring_bytes_) return false;
    *offset = ring_head_;
    *taken = len;
    ring_head_ += len;
  } else {
    const uint64_t pad = ring_bytes_ - ring_head_;
    if (ring_used_ + pad + len > ring_bytes_) return false;
    *offset = 0;
    *taken = pad + len;
    ring_head_ = len;
  }
  ring_used_ += *taken;
  return true;
}

bool IpcPair::pump_sends() {
  bool changed = false;
  while (!failed_ && !sends_.empty()) {
    SendOp& op = sends_.front();
    if (op.bytes > shared_.eager_max_bytes) {
      // Large: the peer reads our buffer itself; the send is held until it says it has.
      RegistrationCache::Found f{0, 0};
      try {
        f = shared_.cache.lookup(op.buf, op.bytes);
      } catch (const std::exception& e) {
        return fail(Failure::io_error, "send to " + who() + ": " + e.what());
      }
      if (f.gen == 0)
        return fail(Failure::io_error, "send to " + who() + ": its buffer cannot be exported through CUDA IPC (managed or "
                                       "pool memory?); messages over " + std::to_string(shared_.eager_max_bytes) +
                                       " bytes need cudaMalloc memory");
      wire::Record r = record(wire::Kind::message);
      std::memcpy(r.tag, op.tag.w, sizeof r.tag);
      r.bytes = op.bytes;
      r.gen = f.gen;
      r.offset = f.offset;
      put(r);
      announced_.push_back(Announced{op.req, 0});
      op.req->transferred = op.bytes;
      sends_.pop_front();
      changed = true;
      continue;
    }
    // Small: staged in our ring, done once the copy there has completed.
    if (!staging_.active) {
      staging_ = Staging{true, 0, 0, 0};
      if (op.bytes > 0) {
        if (!ring_reserve(op.bytes, &staging_.offset, &staging_.taken)) {
          staging_.active = false;
          break;  // the ring is full of messages the peer has not taken: wait for its acks
        }
        staging_.copy = copies_->copy(ring_ + staging_.offset, op.buf, op.bytes);
      }
      changed = true;
    }
    if (staging_.copy > copies_->done()) break;
    wire::Record r = record(wire::Kind::message);
    std::memcpy(r.tag, op.tag.w, sizeof r.tag);
    r.bytes = op.bytes;
    r.gen = ring_gen_;
    r.offset = staging_.offset;
    put(r);
    announced_.push_back(Announced{nullptr, staging_.taken});
    staging_.active = false;
    if (op.req) op.req->transferred = op.bytes;
    complete_first_send();
    changed = true;
  }
  return changed;
}

bool IpcPair::pump_recvs() {
  bool changed = false;
  while (!failed_ && !recvs_.empty() && !arrived_.empty()) {
    Incoming& in = arrived_.front();
    if (!in.started) {
      if (!match_first_recv(in.tag, in.bytes)) return true;
      if (in.bytes > 0) {
        const char* src = nullptr;
        try {
          src = shared_.mappings.get(peer(), in.gen) + in.offset;
        } catch (const std::exception& e) {
          return fail(Failure::io_error, "receive from " + who() + ": mapping its memory: " + e.what());
        }
        in.copy = copies_->copy(recvs_.front().buf, src, in.bytes);
      }
      in.started = true;
      changed = true;
    }
    if (in.copy > copies_->done()) break;
    put(record(wire::Kind::ack));
    recvs_.front().req->transferred = in.bytes;
    complete_first_recv();
    arrived_.pop_front();
    changed = true;
  }
  return changed;
}

// ---- the control socket ----

void IpcPair::put(const wire::Record& r) {
  // Only queued: writing may find the peer gone and fail the pair, which must not happen in
  // the middle of a pump's loop over the queues. progress() and the post hooks flush.
  out_.push_back(wire::Record(r));
}

bool IpcPair::flush() {
  bool changed = false;
  while (!out_.empty() && !hung_up_) {
    ssize_t w = ::send(sock_.get(), &out_.front(), sizeof(wire::Record), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w == static_cast<ssize_t>(sizeof(wire::Record))) {
      out_.pop_front();
      changed = true;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;  // the peer reads later
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      // Gone: what it sent before going is still in our socket; read_socket tells why.
      read_socket();
      if (!failed_ && !gone_) handle_hangup();
      return true;
    }
    fail(Failure::io_error, "control socket of " + who() + ": " + transport::errno_text(errno));
    return true;
  }
  return changed;
}

bool IpcPair::read_socket() {
  if (failed_ || gone_ || hung_up_) return false;
  bool changed = false;
  char buf[1 + wire::kMaxAbortReason + sizeof(wire::Record)];
  bool reset_seen = false;
  for (;;) {
    ssize_t n = ::recv(sock_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      changed = true;
      const auto kind = static_cast<wire::Kind>(buf[0]);
      if (kind == wire::Kind::abort) {
        peer_failed_us_ = true;
        fail(Failure::peer_aborted, n > 1 ? std::string(buf + 1, static_cast<size_t>(n - 1)) : "(no reason given)");
        return true;
      }
      if (n != static_cast<ssize_t>(sizeof(wire::Record)))
        return fail(Failure::io_error, "malformed control record from " + who() + " (" + std::to_string(n) + " bytes)");
      wire::Record r;
      std::memcpy(&r, buf, sizeof r);
      switch (kind) {
        case wire::Kind::message: {
          Incoming in{};
          std::memcpy(in.tag.w, r.tag, sizeof r.tag);
          in.bytes = r.bytes;
          in.gen = r.gen;
          in.offset = r.offset;
          arrived_.push_back(std::move(in));
          break;
        }
        case wire::Kind::ack: {
          if (announced_.empty()) return fail(Failure::io_error, who() + " acknowledged a message it was not sent");
          const Announced a = announced_.front();
          announced_.pop_front();
          if (a.req) complete(a.req);
          ring_used_ -= a.ring_taken;
          break;
        }
        case wire::Kind::retire:
          // Everything we read from it was acknowledged before the peer could free it.
          try {
            shared_.mappings.close(peer(), r.gen);
          } catch (const std::exception& e) {
            return fail(Failure::io_error, "closing a mapping of " + who() + "'s memory: " + e.what());
          }
          break;
        case wire::Kind::bye: bye_received_ = true; break;
        default: return fail(Failure::io_error, "unexpected control record from " + who());
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
    return fail(Failure::io_error, "control socket of " + who() + ": " + transport::errno_text(err));
  }
}

void IpcPair::handle_hangup() {
  if (failed_ || gone_ || hung_up_) return;
  hung_up_ = true;
  peer_failed_us_ = true;
  if (!bye_received_) {
    fail(Failure::peer_closed, "connection to " + who() + " closed unexpectedly (process died or was killed?)");
    return;
  }
  if (!recvs_.empty() || !arrived_.empty() || !sends_.empty() || !announced_.empty()) {
    fail(Failure::peer_closed, who() + " shut down while this rank still expected data from it");
    return;
  }
  gone_ = true;  // an orderly goodbye: nothing more will come, and nothing is missing
}

void IpcPair::send_retire(uint64_t gen) {
  if (failed_ || gone_ || hung_up_) return;
  wire::Record r = record(wire::Kind::retire);
  r.gen = gen;
  put(r);
  flush();
}

void IpcPair::try_send_bye() {
  if (bye_sent_ || failed_ || gone_ || !sends_.empty() || !announced_.empty() || staging_.active) return;
  put(record(wire::Kind::bye));
  bye_sent_ = true;
  flush();
}

void IpcPair::shutdown_socket() {
  if (sock_.valid()) ::shutdown(sock_.get(), SHUT_RDWR);
}

// ---- failures ----

void IpcPair::fail_held(Failure why, const std::string& detail) {
  // Before any request fails: its buffer is the caller's again once it does, so no copy of ours
  // may still read or write it.
  try {
    copies_->drain();
  } catch (const std::exception&) {
    // The GPU failed the copies: nothing of ours runs there any more either.
  }
  for (size_t i = 0; i < announced_.size(); ++i)
    if (Request* r = announced_[i].req; r && r->state == Request::State::pending) r->fail(why, detail);
  announced_.clear();
  arrived_.clear();
  staging_ = Staging{};
}

void IpcPair::send_abort_notice(const std::string& reason) {
  // Non-blocking; a full socket means the peer stopped reading, and it sees the shutdown.
  std::string rec(1, static_cast<char>(wire::Kind::abort));
  rec += reason.substr(0, wire::kMaxAbortReason);
  (void)::send(sock_.get(), rec.data(), rec.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void IpcPair::after_abort() { ::shutdown(sock_.get(), SHUT_WR); }

}  // namespace kolo::cuda_ipc

// What every pair does the same way, so that a transport writes only how bytes move.
//
// The contract (transport.hpp) as code: the FIFO queues of posted sends and receives; refusing a
// post once the connection is over; matching the next arriving message's tag and size against
// the first posted receive; failing everything pending exactly once and reporting that first
// failure to the group's FailureSink; and the state of the orderly close (closing, goodbye
// received, gone) and of an abort (notice sent, or not owed because the peer failed us).
//
// A transport derives from PairBase and supplies the hooks below: how a freshly posted request
// starts moving, how an abort notice reaches the peer, and what it holds beyond the two queues.
// Everything runs on the thread that drives the device's progress; nothing here locks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/ring_queue.hpp"
#include "transports/transport.hpp"

namespace kolo::transport {

class PairBase : public Pair {
 public:
  int peer() const { return peer_; }
  bool failed() const { return failed_; }
  // The pair's first failure (none while healthy; aborted when this process aborted first).
  Failure failure() const { return failure_; }
  // After an abort: whether the first failure left the connection whole, so that a hand-over
  // may resynchronise it (the peer aborted or sent a message the receive did not expect, or this
  // process aborted); a dead peer, a broken stream or an orderly goodbye leave nothing to reuse.
  bool failure_keeps_connection() const {
    return failed_ && !gone_ && !hung_up_ &&
           (failure_ == Failure::aborted || failure_ == Failure::peer_aborted || failure_ == Failure::tag_mismatch ||
            failure_ == Failure::size_mismatch);
  }
  bool bye_received() const { return bye_received_; }
  // Orderly close has begun: messages that nobody will receive may be dropped from now on, so
  // that the peer's goodbye still gets through.
  void set_closing() { closing_ = true; }

  // Starts the request; refuses it (failed at once) if this connection can carry no more.
  void post_send(const void* buf, size_t bytes, const Tag& tag, Request* req) final;
  void post_recv(void* buf, size_t bytes, const Tag& tag, Request* req) final;
  // The contract's part (no receive posted, not failed or gone); the transport's peek_header()
  // reads the header. A false answer also notes that someone waits for a message here
  // (peek_wanted_), which a transport that must ask its peer for wake-ups (shm) honours.
  bool peek_incoming(Tag* tag, uint64_t* bytes) final;

  // The first failure: fails every pending request with `why` and reports it to the sink; later
  // calls do nothing. Always returns true (progress functions return it as "state changed").
  bool fail(Failure why, const std::string& detail);
  // This process aborts: fails every pending request with Failure::aborted and tells the peer
  // why (best effort), unless the peer is gone or is the one that failed us. No report: the
  // engine already knows.
  void abort(const std::string& reason);

 protected:
  PairBase(int peer, FailureSink* sink) : peer_(peer), sink_(sink) {
    // Messages posted the ordinary way are rare on a pair that the direct path serves: the first
    // ones must not allocate.
    sends_.reserve(8);
    recvs_.reserve(8);
  }

  struct SendOp {
    const char* buf;
    size_t bytes;
    size_t done;      // transport-defined progress (bytes out, or header + payload bytes)
    Tag tag;
    Request* req;     // null for a transport's own message (a goodbye frame)
    uint8_t kind;     // transport-defined; 0 for a message the engine posted
  };
  struct RecvOp {
    char* buf;
    size_t bytes;
    size_t done;      // bytes landed, for transports that need to count them
    Tag tag;
    Request* req;
  };

  // Hooks. The new request is sends_.back() / recvs_.back(): move it now if it can move.
  virtual void on_send_posted() = 0;
  virtual void on_recv_posted() = 0;
  // The header (tag and size) of the next incoming message, if it has arrived and nothing of
  // the message has been consumed; only asked while no receive is posted.
  virtual bool peek_header(Tag* tag, uint64_t* bytes) const = 0;
  // Runs once, when the pair fails, before the pending requests fail.
  virtual void on_fail() {}
  // Fails requests the transport holds beyond the two queues (sent, not yet acknowledged) and
  // resets its state of a message half moved. Runs before the queues are failed and cleared.
  virtual void fail_held(Failure /*why*/, const std::string& /*detail*/) {}
  // Best effort and non-blocking: tells the peer this process aborts, with `reason`.
  virtual void send_abort_notice(const std::string& reason) = 0;
  // After an abort's notice: closes this side of the connection for writing where the notice
  // could not go (the peer must learn of the abort somehow); otherwise the connection stays
  // open for a hand-over (Device::hand_over).
  virtual void after_abort() {}

  // A hand-over (Device::hand_over): the connection, resynchronised, serves a new group as
  // `peer` (its rank there), reporting to `sink`. Clears the contract's state of the old group;
  // the transport resets its own.
  void rearm(int peer, FailureSink* sink);

  // The next incoming message carries (got, got_bytes): true if it matches the first receive.
  // Otherwise that receive fails with the mismatch (what arrived is kept in it, for the
  // engine's message) and so does the pair; false. Requires a posted receive.
  bool match_first_recv(const Tag& got, uint64_t got_bytes);
  // The first send / receive finished.
  void complete_first_send();
  void complete_first_recv();
  static void complete(Request* r) { r->state = Request::State::done; }
  void fail_pending(Failure why, const std::string& detail);
  std::string who() const { return "rank " + std::to_string(peer_); }

  RingQueue<SendOp> sends_;  // not std::deque: no allocation per post (common/ring_queue.hpp)
  RingQueue<RecvOp> recvs_;
  bool failed_ = false;
  Failure failure_ = Failure::none;
  bool closing_ = false;
  bool bye_received_ = false;
  bool gone_ = false;            // the peer said goodbye and left; nothing was pending
  bool hung_up_ = false;         // the peer's side ended: nothing more will arrive
  bool peer_failed_us_ = false;  // the failure came from the peer (died, aborted): no notice back
  bool abort_sent_ = false;
  // A peek found nothing: an any-source receive waits for this pair's next message although no
  // receive is posted. Cleared by the next post_recv; shm also clears it when it wakes.
  bool peek_wanted_ = false;

 private:
  // Fails `req` at once if the connection can carry nothing more; true if it did.
  bool refuse(Request* req) const;

  int peer_;
  FailureSink* sink_;
};

}  // namespace kolo::transport

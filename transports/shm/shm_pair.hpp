// One peer on this host: a ring out (in the peer's segment), a ring in (in ours), and the
// control socket. Driven by ShmDevice::poll() on the engine thread only.
//
// Sends go out in posting order. A message below the cross-memory-attach threshold is copied
// into one slot, or several slots that the receiver drains while the sender fills the next ones;
// the send completes when the last piece is in the ring. A larger one is only described in a
// slot (address, size, tag): the receiver reads it straight from the sender's memory with
// process_vm_readv into the user's buffer and counts it done in the ring's `cma_done`, which
// completes the send. Receives match incoming messages in posting order and check tag and size.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <string>

#include "transports/shm/shm_layout.hpp"
#include "transports/shm/shm_socket.hpp"
#include "transports/transport.hpp"

namespace kolo::shm {

class ShmDevice;

struct PairSetup {
  int peer = -1;
  RingView in;            // peer -> us, in our segment
  RingView out;           // us -> peer, in the peer's segment
  Fd sock;                // control socket
  pid_t peer_pid = -1;
  bool peer_reads_us = false;  // the peer can process_vm_readv our memory
  size_t cma_min_bytes = 0;    // 0: never describe messages, copy them through the ring
};

class ShmPair final : public transport::Pair {
 public:
  ShmPair(ShmDevice* dev, PairSetup setup);
  ~ShmPair() override;

  void post_send(const void* buf, size_t bytes, const transport::Tag& tag, transport::Request* req) override;
  void post_recv(void* buf, size_t bytes, const transport::Tag& tag, transport::Request* req) override;

  int peer() const { return peer_; }
  int fd() const { return sock_.get(); }

  // Moves whatever can move through the rings; true if anything moved.
  bool progress();
  // Reads the control socket (doorbells, goodbye, abort notice, hang-up); true if state changed.
  bool read_socket();
  // Before the engine sleeps: announce in shared memory what this pair waits for, so that the
  // peer rings the doorbell when it provides it. Off again when the process is awake.
  void set_waiting(bool on);

  // Orderly close.
  void set_closing() { closing_ = true; }
  void try_send_bye();
  bool closed_cleanly() const { return bye_sent_ && bye_received_; }
  bool done() const { return failed_ || gone_; }
  void shutdown_socket();

  // Fails every pending request; tells the peer (abort notice) unless it is the one gone.
  void abort(const std::string& reason);
  bool failed() const { return failed_; }

 private:
  struct SendOp {
    const char* buf;
    size_t bytes;
    size_t sent;  // bytes already in the ring
    bool started;
    bool describe;  // large: the receiver reads it from our memory
    transport::Tag tag;
    transport::Request* req;
  };
  struct RecvOp {
    char* buf;
    size_t bytes;
    transport::Tag tag;
    transport::Request* req;
  };
  struct DescribedSend {
    uint64_t number;  // completes when the ring's cma_done reaches it
    transport::Request* req;
  };
  // What the receiving side is in the middle of.
  enum class In : uint8_t { idle, pieces, read_remote, discard };

  bool refuse_if_dead(transport::Request* req);
  bool pump_sends();
  bool pump_recvs();
  bool pump_remote_read();
  bool slot_free();
  void publish(SlotHeader* h);
  void consume_slot();
  void notify_receiver();
  void notify_sender();
  void ring_doorbell();
  bool start_message(SlotHeader* h);
  bool wants_inbound() const;
  bool wants_outbound() const { return !sends_.empty() || !described_.empty(); }
  void finish_remote_read();
  void handle_hangup();
  bool fail(transport::Failure why, const std::string& detail);
  void fail_pending(transport::Failure why, const std::string& detail);
  void forget_socket();

  ShmDevice* dev_;
  int peer_;
  RingView in_, out_;
  Fd sock_;
  pid_t peer_pid_;
  bool peer_reads_us_;
  size_t cma_min_;

  // Sender side.
  std::deque<SendOp> sends_;
  std::deque<DescribedSend> described_;
  uint64_t next_out_ = 0;    // next slot use to fill
  uint64_t tail_seen_ = 0;   // last value read from out_.ctl->tail
  uint64_t described_count_ = 0;

  // Receiver side.
  std::deque<RecvOp> recvs_;
  uint64_t next_in_ = 0;     // next slot use to read
  uint64_t remote_done_ = 0; // our count of finished remote reads (mirrors in_.ctl->cma_done)
  In in_state_ = In::idle;
  char* dst_ = nullptr;      // pieces: where the next piece goes
  size_t left_ = 0;          // pieces, discard: bytes still to come
  uint64_t remote_addr_ = 0; // read_remote: the message in the sender's memory
  size_t remote_got_ = 0;
  bool freed_ = false;       // slots consumed since the last notify_sender()

  bool waiting_in_ = false, waiting_out_ = false;  // flags we set in shared memory
  bool closing_ = false;
  bool bye_sent_ = false, bye_received_ = false;
  bool peer_hung_up_ = false;  // the socket ended: nothing more will be published
  bool gone_ = false;          // the peer said goodbye and left; nothing pending
  bool failed_ = false;
  bool peer_failed_us_ = false;  // the failure came from the peer (died or aborted): no notice back
  bool abort_sent_ = false;
  bool in_epoll_ = true;
};

}  // namespace kolo::shm

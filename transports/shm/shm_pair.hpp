// One peer on this host: a ring out (in the peer's segment), a ring in (in ours), and the
// control socket. Driven by ShmDevice::poll() on the engine thread only.
//
// Sends go out in posting order. A message below the cross-memory-attach threshold is copied
// into one slot, or several slots that the receiver drains while the sender fills the next ones;
// the send completes when the last piece is in the ring. A larger one is only described in a
// slot (address, size, tag): the receiver reads it straight from the sender's memory with
// process_vm_readv into the user's buffer and counts it done in the ring's `cma_done`, which
// completes the send. Receives match incoming messages in posting order and check tag and size.
//
// Defined in four files by job: shm_pair.cpp (the ring's data path), shm_pair_remote_read.cpp
// (large messages read from the sender's memory), shm_pair_control.cpp (the control socket and
// sleep flags), shm_pair_abort_handover.cpp (failures, aborts and the hand-over).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "transports/pair_base.hpp"
#include "transports/shm/shm_layout.hpp"
#include "transports/shm/shm_socket.hpp"

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
  // We may write the peer's memory (process_vm_writev; the same permission as reading it) and
  // KOLO_SHM_CMA_HELP is on: we copy pieces of our large messages while the peer reads them.
  bool help_peer = false;
  // We and the peer both issue a membarrier before sleeping (shm_fence.hpp): publishing a slot
  // or freeing one needs no store-load fence before looking at the peer's waiting flag.
  bool light_fence = false;
};

class ShmPair final : public transport::PairBase {
 public:
  ShmPair(ShmDevice* dev, transport::FailureSink* sink, PairSetup setup);
  ~ShmPair() override;

  int fd() const { return sock_.get(); }

  // Moves whatever can move through the rings; true if anything moved.
  bool progress();
  // Reads the control socket (doorbells, goodbye, abort notice, hang-up); true if state changed.
  bool read_socket();
  // Before the engine sleeps: announce in shared memory what this pair waits for, so that the
  // peer rings the doorbell when it provides it. Off again when the process is awake. True if
  // a flag is now raised (the pair waits for something).
  bool set_waiting(bool on);

  // The direct path (transport.hpp): one slot each way, while nothing is posted that way.
  Now send_now(const void* buf, size_t bytes, const transport::Tag& tag) override;
  bool recv_now(void* buf, size_t bytes, const transport::Tag& tag) override;
  size_t recv_now_max_bytes() const override { return in_.payload_bytes(); }

  // Hand-over (ShmDevice::hand_over), as TcpPair's: reusable() after the abort when the control
  // socket is still open both ways and the pair did not fail on a dead peer or a corrupt ring.
  // begin_resync() readies our record (our next slot use is the cut: the peer skips every slot
  // before it), resync_step() sends it and reads the socket until the peer's, which must carry
  // `expect_rank`, `size` and `token` (true once both are done; throws Error when the peer
  // closes or sends garbage), and applies the peer's cut to our inbound ring: the slots it
  // published for the old group are skipped unread, counters continue, so nothing in the rings
  // needs clearing. finish_resync() makes the pair a healthy one of `dev`'s group.
  bool reusable() const { return failure_keeps_connection() && sock_.valid() && !sock_shut_; }
  void begin_resync(uint64_t token, int rank, int size, int expect_rank);
  bool resync_step();
  bool resync_writing() const { return !resync_sent_; }
  void finish_resync(ShmDevice* dev, int peer, transport::FailureSink* sink);

  // Orderly close.
  void try_send_bye();
  bool closed_cleanly() const { return bye_sent_ && bye_received_; }
  bool done() const { return failed_ || gone_; }
  void shutdown_socket();
  // Bytes of our large messages that this side wrote into the peer's memory itself.
  uint64_t helped_bytes() const { return helped_bytes_; }
  // Publishing and freeing skip the store-load fence (PairSetup::light_fence).
  bool light_fence() const { return light_fence_; }

 private:
  // A send's `done` counts the bytes already in the ring.
  struct DescribedSend {
    uint64_t number;  // completes when the ring's cma_done reaches it
    transport::Request* req;
    const char* buf;  // the message, for the pieces this side writes itself
    size_t bytes;
  };
  // What the receiving side is in the middle of.
  enum class In : uint8_t { idle, pieces, read_remote, discard };

  void on_send_posted() override;
  void on_recv_posted() override;
  // The first slot of the next message, published and not yet consumed.
  bool peek_header(transport::Tag* tag, uint64_t* bytes) const override;
  void on_fail() override;
  void fail_held(transport::Failure why, const std::string& detail) override;
  void send_abort_notice(const std::string& reason) override;
  void after_abort() override;

  // Large messages are described, and the receiver reads them from our memory.
  bool describes(size_t bytes) const { return peer_reads_us_ && cma_min_ > 0 && bytes >= cma_min_; }
  bool pump_sends();
  bool pump_recvs();
  bool pump_remote_read();
  // The sender's part of a described message the peer is reading: one piece per call.
  bool help_remote_read();
  // The receiver publishes where the message it starts reading goes, for the sender's pieces.
  void offer_help(const char* dst);
  // Before a failed receive hands its buffer back: no sender piece may still be written into it.
  void stop_help();
  bool slot_free();
  void publish(SlotHeader* h);
  // A whole message of at most kSmallBytes, in the header's line (SlotKind::small).
  static void write_small(SlotHeader* h, const char* buf, size_t bytes, const transport::Tag& tag);
  void consume_slot();
  void notify_receiver();
  void notify_sender();
  void fence_before_flag_check() const;
  void ring_doorbell();
  bool start_message(SlotHeader* h);
  bool wants_inbound() const;
  bool wants_outbound() const { return !sends_.empty() || !described_.empty(); }
  void finish_remote_read();
  void handle_hangup();
  void forget_socket();

  ShmDevice* dev_;
  RingView in_, out_;
  Fd sock_;
  pid_t peer_pid_;
  bool peer_reads_us_;
  size_t cma_min_;
  bool help_peer_;
  const bool light_fence_;
  uint64_t helped_bytes_ = 0;

  // Sender side.
  RingQueue<DescribedSend> described_;
  uint64_t next_out_ = 0;    // next slot use to fill
  uint64_t tail_seen_ = 0;   // last value read from out_.ctl->tail
  uint64_t described_count_ = 0;

  // Receiver side.
  uint64_t next_in_ = 0;     // next slot use to read
  uint64_t remote_done_ = 0; // our count of finished remote reads (mirrors in_.ctl->cma_done)
  In in_state_ = In::idle;
  char* dst_ = nullptr;      // pieces: where the next piece goes
  size_t left_ = 0;          // pieces, discard: bytes still to come
  uint64_t remote_addr_ = 0; // read_remote: the message in the sender's memory
  size_t remote_got_ = 0;    // read_remote: bytes this side read (the sender writes the rest)
  size_t remote_claimed_ = 0;  // read_remote: bytes of the pieces this side claimed
  size_t remote_returned_ = 0; // read_remote: bytes of pieces the sender handed back
  bool freed_ = false;       // slots consumed since the last notify_sender()

  bool waiting_in_ = false, waiting_out_ = false;  // flags we set in shared memory
  bool bye_sent_ = false;
  bool in_epoll_ = true;
  bool sock_shut_ = false;     // closed for writing (after an abort whose notice could not go)
  bool notice_whole_ = false;  // the abort notice went out
  Resync resync_{};            // begin_resync(): our record
  bool resync_sent_ = true, resync_got_ = false;
  int resync_expect_ = -1;
  // hung_up_ (PairBase): the socket ended, nothing more will be published.
};

}  // namespace kolo::shm

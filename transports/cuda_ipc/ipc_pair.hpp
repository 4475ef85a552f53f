// IpcPair: one peer's pair of the cuda_ipc pair device (ipc_pair_device.hpp), the contract of
// transports/transport.hpp over device memory on one node. Buffers posted on it are device
// memory (what IpcMemory calls so; a buffer must hold its data when posted: the caller has
// synchronized the stream that wrote it), and a completed receive's bytes are in device memory.
//
// How a message moves. Small messages (at most kEagerMaxBytes) are copied by the sender into a
// staging ring of its own (device memory, exported once through the registration cache and
// mapped once by the peer); once that copy completes the send is done, and a message record
// (tag, size, where) goes over the control socket. Larger ones are read straight from the
// sender's buffer (exported once per allocation by the registration cache, reused by later
// messages): the record is sent at once, and the send completes when the peer acknowledges.
// The receiver queues records in arrival order; the first posted receive is matched against the
// first record (PairBase: a different tag or size fails it with what arrived), copies the bytes
// from its mapping into the receive buffer, and acknowledges once the copy has completed, which
// frees the ring space or completes the large send. Every copy is asynchronous on the pair's
// CopyQueue and polled (cudaEventQuery): nothing here blocks.
//
// Failures: the control socket is a unix-domain SOCK_SEQPACKET connection, so a peer that dies
// closes it (peer_closed, at once); an abort notice is a record with the reason; a goodbye is
// sent once everything this side sent has been acknowledged, so it never overtakes data.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "common/ring_queue.hpp"
#include "transports/common/fd.hpp"
#include "transports/cuda_ipc/ipc_memory.hpp"
#include "transports/cuda_ipc/ipc_wire.hpp"
#include "transports/cuda_ipc/registration_cache.hpp"
#include "transports/pair_base.hpp"

namespace kolo::cuda_ipc {

// What the pairs of one device share: the memory, the registration cache (this rank's exports)
// and the mappings of the peers' exports.
struct PairShared {
  IpcMemory& memory;
  RegistrationCache& cache;
  PeerMappings& mappings;
  size_t eager_max_bytes;
};

class IpcPair final : public transport::PairBase {
 public:
  // `ring` (ring_bytes of exportable device memory, registration `ring_gen`) is this side's
  // staging ring toward the peer; the device owns it.
  IpcPair(int peer, transport::FailureSink* sink, PairShared shared, transport::Fd sock, char* ring, size_t ring_bytes,
          uint64_t ring_gen);
  ~IpcPair() override;

  // Moves what can move: reads the socket, starts and finishes copies, writes records.
  bool progress();
  // Tells the peer that this rank's registration `gen` is gone (RegistrationCache's callback).
  void send_retire(uint64_t gen);
  // Orderly close: the goodbye, once nothing this side sent waits for the peer.
  void try_send_bye();
  // Closed cleanly: goodbyes both ways (or the peer left after its goodbye), or the pair failed.
  bool done() const { return failed_ || gone_ || (bye_sent_ && bye_received_); }
  bool closed_cleanly() const { return gone_ || (bye_sent_ && bye_received_); }
  void shutdown_socket();

 private:
  void on_send_posted() override;
  void on_recv_posted() override;
  bool peek_header(transport::Tag* tag, uint64_t* bytes) const override;
  void fail_held(transport::Failure why, const std::string& detail) override;
  void send_abort_notice(const std::string& reason) override;
  void after_abort() override;

  bool read_socket();
  void handle_hangup();
  bool pump_sends();
  bool pump_recvs();
  // Runs a pump; a GPU error it throws fails the pair instead.
  bool guarded(bool (IpcPair::*pump)());
  // Queues a record and writes what the socket takes.
  void put(const wire::Record& r);
  bool flush();
  // Space for `bytes` in the staging ring: its offset, and the ring bytes it takes (padding
  // at the ring's end included), released in order by acknowledgements.
  bool ring_reserve(size_t bytes, uint64_t* offset, uint64_t* taken);
  // The buffer is device memory of this process (checked at post: a host pointer would
  // otherwise be handed to the GPU's copy engine).
  bool check_device_buffer(const void* buf, size_t bytes, const char* what);

  struct Announced {
    transport::Request* req;  // a large send, completed by the ack; null for a staged message
    uint64_t ring_taken;      // staged: ring bytes freed by the ack
  };
  struct Incoming {
    transport::Tag tag;
    uint64_t bytes, gen, offset;
    uint64_t copy;  // the CopyQueue number of its copy, once started
    bool started;
  };
  struct Staging {
    bool active = false;
    uint64_t copy = 0, offset = 0, taken = 0;
  };

  PairShared shared_;
  transport::Fd sock_;
  std::unique_ptr<CopyQueue> copies_;
  char* ring_;
  size_t ring_bytes_;
  uint64_t ring_gen_;
  uint64_t ring_head_ = 0, ring_used_ = 0;
  Staging staging_;
  RingQueue<Announced> announced_;
  RingQueue<Incoming> arrived_;
  RingQueue<wire::Record> out_;  // records the socket has not taken yet
  bool bye_sent_ = false;
};

}  // namespace kolo::cuda_ipc

// One peer over one reliable-connected (RC) queue pair: the ring protocol of ib_wire.hpp.
// Driven by IbDevice::poll(), which hands it the work completions of its QP.
#pragma once
#include <string>

#include "transports/ibverbs/ib_port.hpp"
#include "transports/ibverbs/ib_verbs.hpp"
#include "transports/ibverbs/ib_wire.hpp"
#include "transports/pair_base.hpp"

namespace kolo::ib {

class IbDevice;

struct RingGeometry {
  size_t slot_bytes;  // header included
  size_t nslots;
};

class IbPair final : public transport::PairBase {
 public:
  IbPair(transport::FailureSink* sink, int peer, ibv_pd* pd, ibv_cq* cq, const RingGeometry& g, const PortChoice& port);
  ~IbPair() override;

  // Setup: what the peer needs to know, and moving the QP to ready-to-send with its answer.
  ConnInfo local_info() const;
  void connect(const ConnInfo& remote);
  uint32_t qpn() const { return qp_->qp_num; }
  // QP depths, for sizing the shared completion queue.
  static int send_depth(const RingGeometry& g) { return static_cast<int>(2 * g.nslots + 4); }
  static int recv_depth(const RingGeometry& g) { return static_cast<int>(2 * g.nslots + 2); }

  // A completion of this pair's QP; true if a request changed state.
  bool on_completion(const ibv_wc& wc);
  // Sends what credits allow, copies arrived slots out, returns credits; true if anything moved.
  bool progress();

  // Orderly close: after set_closing() (PairBase), messages nobody receives are dropped (their
  // slots freed), so a peer flushing its sends is never stuck without credits.
  bool sends_drained() const { return sends_.empty() && inflight_.empty(); }
  // The peer said goodbye: it sends nothing more and will soon destroy its queue pair, so our
  // last credit messages may fail (retry exceeded) without anything being wrong.
  void set_finished() { finished_ = true; }

 private:
  // A send's `done`: bytes already copied out to the staging ring; a receive's: bytes landed.
  struct InflightSend {
    uint64_t seq_end;  // done once this many writes have completed
    transport::Request* req;
  };
  void on_send_posted() override;
  void on_recv_posted() override;
  // The header of the next slot the peer wrote, if it starts a message.
  bool peek_header(transport::Tag* tag, uint64_t* bytes) const override;
  void fail_held(transport::Failure why, const std::string& detail) override;
  // The notice travels on the control channel (IbDevice::abort); the queue pair just stops.
  void send_abort_notice(const std::string&) override {}

  std::string post_receives(int n);  // "" or what failed
  bool pump_sends();
  bool deliver_slots();
  bool return_credits();

  RingGeometry geo_;
  PortChoice port_;
  RegisteredBuffer staging_;  // our copies of outgoing slots, written from
  RegisteredBuffer ring_;     // the peer writes into it
  QpPtr qp_;
  uint32_t psn_;
  uint64_t remote_ring_ = 0;
  uint32_t remote_rkey_ = 0;

  RingQueue<InflightSend> inflight_;
  uint64_t sent_ = 0;         // slots written (posted)
  uint64_t writes_done_ = 0;  // slots whose write completed: staging slot free again
  uint64_t credits_ = 0;      // slots the peer has freed in its ring
  uint64_t arrived_ = 0;      // slots the peer has written into ours
  uint64_t consumed_ = 0;     // slots copied out (or dropped)
  uint64_t owed_ = 0;         // credits not yet returned
  int sq_outstanding_ = 0;
  int sq_depth_;
  bool finished_ = false;
};

}  // namespace kolo::ib

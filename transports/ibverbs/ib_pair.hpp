// One peer over one reliable-connected (RC) queue pair: the ring protocol of ib_wire.hpp.
// Driven by IbDevice::poll(), which hands it the work completions of its QP.
#pragma once
#include <deque>
#include <string>

#include "transports/ibverbs/ib_port.hpp"
#include "transports/ibverbs/ib_verbs.hpp"
#include "transports/ibverbs/ib_wire.hpp"
#include "transports/transport.hpp"

namespace kolo::ib {

class IbDevice;

struct RingGeometry {
  size_t slot_bytes;  // header included
  size_t nslots;
};

class IbPair final : public transport::Pair {
 public:
  IbPair(IbDevice* dev, int peer, ibv_pd* pd, ibv_cq* cq, const RingGeometry& g, const PortChoice& port);
  ~IbPair() override;

  // Setup: what the peer needs to know, and moving the QP to ready-to-send with its answer.
  ConnInfo local_info() const;
  void connect(const ConnInfo& remote);
  uint32_t qpn() const { return qp_->qp_num; }
  int peer() const { return peer_; }
  // QP depths, for sizing the shared completion queue.
  static int send_depth(const RingGeometry& g) { return static_cast<int>(2 * g.nslots + 4); }
  static int recv_depth(const RingGeometry& g) { return static_cast<int>(2 * g.nslots + 2); }

  void post_send(const void* buf, size_t bytes, const transport::Tag& tag, transport::Request* req) override;
  void post_recv(void* buf, size_t bytes, const transport::Tag& tag, transport::Request* req) override;

  // A completion of this pair's QP; true if a request changed state.
  bool on_completion(const ibv_wc& wc);
  // Sends what credits allow, copies arrived slots out, returns credits; true if anything moved.
  bool progress();

  // Fails every pending request and reports `why` to the device's sink (first failure only).
  void fail(transport::Failure why, const std::string& detail);
  // Fails every pending request without reporting (this process aborts).
  void abort(const std::string& reason);
  bool failed() const { return failed_; }
  // Orderly close: from now on, messages nobody receives are dropped (their slots freed), so a
  // peer flushing its sends is never stuck without credits.
  void set_closing() { closing_ = true; }
  bool sends_drained() const { return sends_.empty() && inflight_.empty(); }
  // The peer said goodbye: it sends nothing more and will soon destroy its queue pair, so our
  // last credit messages may fail (retry exceeded) without anything being wrong.
  void set_finished() { finished_ = true; }

 private:
  struct SendOp {
    const char* buf;
    size_t bytes;
    size_t offset;  // bytes already copied out to the staging ring
    transport::Tag tag;
    transport::Request* req;
  };
  struct InflightSend {
    uint64_t seq_end;  // done once this many writes have completed
    transport::Request* req;
  };
  struct RecvOp {
    char* buf;
    size_t bytes;
    size_t got;
    transport::Tag tag;
    transport::Request* req;
  };

  bool refuse_if_failed(transport::Request* req) const;
  std::string post_receives(int n);  // "" or what failed
  bool pump_sends();
  bool deliver_slots();
  bool return_credits();
  void fail_pending(transport::Failure why, const std::string& detail);
  std::string who() const { return "rank " + std::to_string(peer_); }

  IbDevice* dev_;
  int peer_;
  RingGeometry geo_;
  PortChoice port_;
  RegisteredBuffer staging_;  // our copies of outgoing slots, written from
  RegisteredBuffer ring_;     // the peer writes into it
  QpPtr qp_;
  uint32_t psn_;
  uint64_t remote_ring_ = 0;
  uint32_t remote_rkey_ = 0;

  std::deque<SendOp> sends_;
  std::deque<InflightSend> inflight_;
  std::deque<RecvOp> recvs_;
  uint64_t sent_ = 0;         // slots written (posted)
  uint64_t writes_done_ = 0;  // slots whose write completed: staging slot free again
  uint64_t credits_ = 0;      // slots the peer has freed in its ring
  uint64_t arrived_ = 0;      // slots the peer has written into ours
  uint64_t consumed_ = 0;     // slots copied out (or dropped)
  uint64_t owed_ = 0;         // credits not yet returned
  int sq_outstanding_ = 0;
  int sq_depth_;
  bool failed_ = false;
  bool closing_ = false;
  bool finished_ = false;
};

}  // namespace kolo::ib

// The RDMA verbs transport's device: one port, one protection domain, one completion queue
// (with a completion channel, so an idle rank can sleep) and one RC queue pair per peer.
//
// Beside the queue pairs every pair of ranks keeps a control channel (transports/control_channel.hpp,
// under the store prefix "<group>/ib"), which carries what verbs cannot: the job-secret handshake
// before any queue pair is used, abort notices, goodbyes, and the prompt news of a peer's death
// (its connection closes at once; a dead peer's QP would only show up as retry-exceeded on the
// next write).
// Setup is in ib_connect.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "transports/ibverbs/ib_pair.hpp"
#include "transports/ibverbs/ib_port.hpp"
#include "transports/common/fd.hpp"
#include "transports/control_channel.hpp"
#include "transports/transport.hpp"

namespace kolo::ib {

class IbDevice final : public transport::Device, private transport::FailureSink {
 public:
  // True when this process and `peer` both have a usable port (peers on other hosts say so
  // through the store, so that both ends of a pair choose the same transport).
  static bool reaches(const transport::Bootstrap& b, int peer);
  static std::unique_ptr<transport::Device> connect(const transport::Bootstrap& b, const std::vector<int>& peers);
  ~IbDevice() override;

  const char* name() const override { return "ibverbs"; }
  transport::Pair* pair(int peer) override;
  bool poll() override;
  int wait_fd() const override { return epfd_.get(); }
  void abort(const std::string& reason) override;
  std::vector<int> close(std::chrono::steady_clock::time_point deadline) override;

  void report_failure(int peer, transport::Failure why, const std::string& detail);

 private:
  IbDevice(int size, transport::FailureSink* sink);
  void connect_or_throw(const transport::Bootstrap& b, const std::vector<int>& peers);
  // Failures the side connections see (death, abort notices) fail the pair's verbs requests too.
  void peer_failed(int peer, transport::Failure why, const std::string& detail) override;

  bool poll_cq();
  bool drain_channel();
  void handle_async_events();
  bool progress_pairs();
  IbPair* pair_of_qp(uint32_t qpn);
  void fail_all(const std::string& detail);

  transport::FailureSink* sink_;
  OpenPort port_;
  PdPtr pd_;
  ChannelPtr channel_;
  CqPtr cq_;
  std::vector<std::unique_ptr<IbPair>> pairs_;  // by rank; destroyed before the CQ and the PD
  std::vector<IbPair*> list_;
  std::unique_ptr<transport::ControlChannel> side_;  // handshake, goodbyes, abort notices, deaths
  transport::Fd epfd_;                               // side channel + completion channel + async events
  bool armed_ = false;                           // the CQ will signal the channel on its next completion
  unsigned polls_ = 0;
};

}  // namespace kolo::ib

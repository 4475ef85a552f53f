// The TCP transport's device: one epoll set (edge-triggered) over the connections to the group's
// peers, and the connection setup with its secret-checking handshake: a full mesh at once
// (KOLO_CONNECT=eager), or each connection on its first use (lazy: on_demand.hpp).
#pragma once
#include <memory>
#include <vector>

#include "transports/tcp/on_demand.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_pair.hpp"
#include "common/tls.hpp"
#include "transports/transport.hpp"

namespace kolo::tcp {

class TcpDevice final : public transport::Device {
 public:
  static std::unique_ptr<transport::Device> connect(const transport::Bootstrap& b, const std::vector<int>& peers);
  // The same, typed: the control channel (tcp_control.cpp) drives the pairs itself.
  static std::unique_ptr<TcpDevice> connect_device(const transport::Bootstrap& b, const std::vector<int>& peers);
  // The same with TLS settings of its own instead of KOLO_TLS* (tests give the ranks of one
  // process different settings).
  static std::unique_ptr<TcpDevice> connect_device(const transport::Bootstrap& b, const std::vector<int>& peers,
                                                   const TlsSettings& tls);
  // A device over a connection to `peer` that is already set up (its handshake done): lets the
  // frame fuzzer (tests/fuzz/fuzz_tcp_frames.cpp) feed a pair bytes without a store or a handshake.
  static std::unique_ptr<TcpDevice> adopt(int size, transport::FailureSink* sink, int peer, Fd fd);
  ~TcpDevice() override;

  const char* name() const override { return "tcp"; }
  transport::Pair* pair(int peer) override;
  TcpPair* tcp_pair(int peer) const;
  bool poll() override;
  // Before the engine sleeps on the epoll descriptor: a poll that asks epoll (see poll_pairs).
  bool prepare_sleep() override { return poll_pairs(true); }
  int wait_fd() const override { return epfd_.get(); }
  void abort(const std::string& reason) override;
  // Connections made eagerly or on demand, not with TLS (TcpPair::reusable).
  std::vector<int> reusable_peers() const override;
  std::unique_ptr<transport::Device> hand_over(const Handover& h) override;
  std::vector<int> close(std::chrono::steady_clock::time_point deadline) override;

  // A connection whose handshake is done becomes the pair of `peer` (OnDemand calls it too).
  // With TLS, `tls` is its session, the TLS handshake done (eager setup) or not yet (lazy).
  TcpPair* add_pair(int peer, Fd fd, std::unique_ptr<TlsSession> tls = nullptr);
  // KOLO_TLS=1: a session for a connection to `peer` whose kolo hello is done; `dialled`: this
  // side connected (the TLS client). Null without TLS.
  std::unique_ptr<TlsSession> tls_session(int fd, int peer, bool dialled) const;
  bool tls() const { return tls_ != nullptr; }

 private:
  // poll(): reads the sockets that a posted receive waits on at once and asks epoll only now and
  // then (or with `ask_epoll`); see tcp_device.cpp.
  bool poll_pairs(bool ask_epoll);
  unsigned polls_ = 0;
  TcpDevice(int size, transport::FailureSink* sink);
  // A pair handed over from another device (hand_over): watched here as `pair->peer()`.
  void adopt_pair(std::unique_ptr<TcpPair> pair);
  static std::unique_ptr<TcpDevice> connect_or_throw(const transport::Bootstrap& b, const std::vector<int>& peers,
                                                     const TlsSettings& tls);

  Fd epfd_;
  std::unique_ptr<TlsContext> tls_;  // KOLO_TLS=1 only
  std::vector<std::unique_ptr<TcpPair>> pairs_;  // indexed by rank; null where not connected
  std::vector<TcpPair*> live_;                   // the non-null ones: poll() walks these, not every rank
  std::unique_ptr<OnDemand> on_demand_;          // lazy mode only
  transport::FailureSink* sink_;
};

}  // namespace kolo::tcp

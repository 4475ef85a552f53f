// The TCP transport's device: one epoll set (edge-triggered) over a full mesh of connections to
// the group's peers, and the connection setup with its secret-checking handshake.
#pragma once
#include <memory>
#include <vector>

#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_pair.hpp"
#include "transports/transport.hpp"

namespace kolo::tcp {

class TcpDevice final : public transport::Device {
 public:
  static std::unique_ptr<transport::Device> connect(const transport::Bootstrap& b, const std::vector<int>& peers);
  // The same, typed: the control channel (tcp_control.cpp) drives the pairs itself.
  static std::unique_ptr<TcpDevice> connect_device(const transport::Bootstrap& b, const std::vector<int>& peers);
  // A device over a connection to `peer` that is already set up (its handshake done): lets the
  // frame fuzzer (tests/fuzz/fuzz_tcp_frames.cpp) feed a pair bytes without a store or a handshake.
  static std::unique_ptr<TcpDevice> adopt(int size, transport::FailureSink* sink, int peer, Fd fd);
  ~TcpDevice() override;

  const char* name() const override { return "tcp"; }
  transport::Pair* pair(int peer) override;
  TcpPair* tcp_pair(int peer) const;
  bool poll() override;
  int wait_fd() const override { return epfd_.get(); }
  void abort(const std::string& reason) override;
  std::vector<int> close(std::chrono::steady_clock::time_point deadline) override;

 private:
  TcpDevice(int size, transport::FailureSink* sink);
  static std::unique_ptr<TcpDevice> connect_or_throw(const transport::Bootstrap& b, const std::vector<int>& peers);
  void add_pair(int peer, Fd fd);

  Fd epfd_;
  std::vector<std::unique_ptr<TcpPair>> pairs_;  // indexed by rank; null where not connected
  transport::FailureSink* sink_;
};

}  // namespace kolo::tcp

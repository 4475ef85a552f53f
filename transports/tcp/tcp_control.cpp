#include "transports/tcp/tcp_control.hpp"

#include <sys/socket.h>

#include "transports/tcp/tcp_device.hpp"

namespace kolo::tcp {

namespace {

class TcpControlChannel final : public transport::ControlChannel {
 public:
  explicit TcpControlChannel(std::unique_ptr<TcpDevice> dev) : dev_(std::move(dev)) {}

  bool poll() override { return dev_->poll(); }
  int wait_fd() const override { return dev_->wait_fd(); }
  void abort(const std::string& reason) override { dev_->abort(reason); }

  void send_goodbye(int peer) override {
    TcpPair* p = at(peer);
    p->set_closing();
    p->queue_bye();
  }
  bool goodbye_flushed(int peer) const override { return at(peer)->sends_drained(); }
  bool goodbye_received(int peer) const override { return at(peer)->bye_received(); }
  bool failed(int peer) const override { return at(peer)->failed(); }
  void hang_up(int peer) override { ::shutdown(at(peer)->fd(), SHUT_RDWR); }

 private:
  TcpPair* at(int peer) const { return dev_->tcp_pair(peer); }

  std::unique_ptr<TcpDevice> dev_;
};

}  // namespace

std::unique_ptr<transport::ControlChannel> connect_control_channel(const transport::Bootstrap& b,
                                                                    const std::vector<int>& peers) {
  // Always a full mesh at once: the owner drives the pairs itself from the start (tcp_pair()),
  // and a control channel exists to report any peer's death promptly.
  transport::Bootstrap eager = b;
  eager.connect_lazily = false;
  return std::make_unique<TcpControlChannel>(TcpDevice::connect_device(eager, peers));
}

}  // namespace kolo::tcp

namespace kolo::transport {

// Transports that need a control channel beside their data path (ibverbs) get TCP's
// (control_channel.hpp).
std::unique_ptr<ControlChannel> connect_control_channel(const Bootstrap& b, const std::vector<int>& peers) {
  return tcp::connect_control_channel(b, peers);
}

}  // namespace kolo::transport

// The transports kolo knows. A new transport is one folder plus one line here.
#include <string>

#include "transports/control_channel.hpp"
#include "transports/ibverbs/ibverbs_config.hpp"
#include "transports/shm/shm_device.hpp"
#include "transports/tcp/tcp_control.hpp"
#include "transports/tcp/tcp_device.hpp"
#include "transports/transport.hpp"
#if KOLO_HAVE_IBVERBS
#include "transports/ibverbs/ib_device.hpp"
#endif

namespace kolo::transport {

const std::vector<TransportInfo>& all_transports() {
  static const std::vector<TransportInfo> list = {
      {"tcp", 10, [](const Bootstrap&, int) { return true; }, &tcp::TcpDevice::connect},
      {"shm", 20, &shm::ShmDevice::reaches, &shm::ShmDevice::connect},
#if KOLO_HAVE_IBVERBS
      // Between tcp and shm: chosen for peers on other hosts when both ends have an active port.
      {"ibverbs", 15, &ib::IbDevice::reaches, &ib::IbDevice::connect},
#endif
  };
  return list;
}

// Transports that need a control channel beside their data path (ibverbs) get TCP's: every host
// has it, and it reports a dead peer the moment its socket closes.
std::unique_ptr<ControlChannel> connect_control_channel(const Bootstrap& b, const std::vector<int>& peers) {
  return tcp::connect_control_channel(b, peers);
}

const TransportInfo* find_transport(const std::string& name) {
  for (const auto& t : all_transports())
    if (name == t.name) return &t;
  return nullptr;
}

const char* failure_name(Failure f) {
  switch (f) {
    case Failure::none: return "none";
    case Failure::peer_closed: return "peer closed";
    case Failure::peer_aborted: return "peer aborted";
    case Failure::tag_mismatch: return "tag mismatch";
    case Failure::size_mismatch: return "size mismatch";
    case Failure::io_error: return "I/O error";
    case Failure::aborted: return "aborted";
  }
  return "?";
}

}  // namespace kolo::transport

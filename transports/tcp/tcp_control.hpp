// The TCP transport as a control channel (transports/control_channel.hpp): a TcpDevice whose
// pairs carry no data, only the handshake, goodbyes, abort notices and hang-ups.
#pragma once
#include <memory>
#include <vector>

#include "transports/control_channel.hpp"

namespace kolo::tcp {

std::unique_ptr<transport::ControlChannel> connect_control_channel(const transport::Bootstrap& b,
                                                                    const std::vector<int>& peers);

}  // namespace kolo::tcp

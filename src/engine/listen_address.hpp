// The address a rank listens on for its TCP peers and publishes to them.
#pragma once
#include <string>
#include <vector>

namespace kolo::engine {

struct Ipv4Interface {
  std::string name;     // eth0
  std::string address;  // 10.77.0.10
  bool loopback = false;
};

// The machine's up interfaces that have an IPv4 address, in getifaddrs order.
std::vector<Ipv4Interface> up_ipv4_interfaces();

// Which interface to use, as NCCL_SOCKET_IFNAME: `spec` is a comma list of name prefixes
// ("eth,ib"), "=" before the list asks for exact names ("=eth0"), "^" for every interface but
// those ("^docker,lo"). With a spec, the first interface it allows wins, loopback only when
// named; without one, 127.0.0.1 when `one_host`, else the first non-loopback interface.
// Throws kolo::InvalidArgument when the spec allows no interface, naming the ones there are, and
// kolo::Error when ranks on several hosts find no interface but loopback.
std::string pick_listen_address(const std::vector<Ipv4Interface>& interfaces, const std::string& spec,
                                bool one_host);

// KOLO_SOCKET_IFADDR when set, else pick_listen_address over this machine's interfaces with
// KOLO_SOCKET_IFNAME.
std::string listen_address(bool one_host);

}  // namespace kolo::engine

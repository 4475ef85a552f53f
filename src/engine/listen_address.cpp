#include "engine/listen_address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include "common/config.hpp"
#include "common/log.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {
namespace {

struct IfnameSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};

IfnameSpec parse_spec(const std::string& text) {
  IfnameSpec spec;
  size_t i = 0;
  if (i < text.size() && text[i] == '^') spec.exclude = true, ++i;
  if (i < text.size() && text[i] == '=') spec.exact = true, ++i;
  while (i <= text.size()) {
    size_t comma = text.find(',', i);
    if (comma == std::string::npos) comma = text.size();
    if (comma > i) spec.names.push_back(text.substr(i, comma - i));
    i = comma + 1;
  }
  return spec;
}

bool named(const IfnameSpec& spec, const std::string& name) {
  for (const auto& n : spec.names)
    if (spec.exact ? name == n : name.rfind(n, 0) == 0) return true;
  return false;
}

std::string describe(const std::vector<Ipv4Interface>& interfaces) {
  std::string out;
  for (const auto& i : interfaces) out += (out.empty() ? "" : ", ") + i.name + " " + i.address;
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<Ipv4Interface> up_ipv4_interfaces() {
  std::vector<Ipv4Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_UP) == 0) continue;
    char ip[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, ip, sizeof ip);
    out.push_back({i->ifa_name, ip, (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return out;
}

std::string pick_listen_address(const std::vector<Ipv4Interface>& interfaces, const std::string& spec_text,
                                bool one_host) {
  if (!spec_text.empty()) {
    const IfnameSpec spec = parse_spec(spec_text);
    for (const auto& i : interfaces) {
      // An exclusion list keeps loopback out unless the user asked for it by name elsewhere:
      // "^docker" must not pick lo on a multi-host job.
      const bool allowed = spec.exclude ? !named(spec, i.name) && !i.loopback : named(spec, i.name);
      if (allowed) return i.address;
    }
    throw InvalidArgument("KOLO_SOCKET_IFNAME='" + spec_text + "' allows no up interface with an IPv4 address (this host has: " +
                          describe(interfaces) + ")");
  }
  if (one_host) return "127.0.0.1";
  for (const auto& i : interfaces)
    if (!i.loopback) return i.address;
  throw Error("the ranks are on several hosts but this one has no up interface with an IPv4 address besides loopback (" +
              describe(interfaces) + "); set KOLO_SOCKET_IFNAME or KOLO_SOCKET_IFADDR");
}

std::string listen_address(bool one_host) {
  const std::string chosen = config::is_set("KOLO_SOCKET_IFADDR")
                                 ? config::get_string("KOLO_SOCKET_IFADDR")
                                 : pick_listen_address(up_ipv4_interfaces(), config::get_string("KOLO_SOCKET_IFNAME"), one_host);
  // Asked for by name, so not an error; but peers on other hosts will be refused by their own
  // loopback, and this line is the one that explains their connection errors.
  if (!one_host && chosen.rfind("127.", 0) == 0)
    KOLO_LOG(warn, "this rank's group spans several hosts but it listens on " << chosen
                   << " (KOLO_SOCKET_IFADDR / KOLO_SOCKET_IFNAME): ranks on other hosts cannot reach it");
  return chosen;
}

}  // namespace kolo::engine

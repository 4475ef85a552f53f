// The registry: every transport adds itself while the library loads (KOLO_REGISTER_TRANSPORT in
// its own folder), and the engine reads the list from here. Nothing here names a transport.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "transports/transport.hpp"

namespace kolo::transport {
namespace {

// Constructed on first use: registrations run during static initialisation, in an order the
// linker decides.
std::vector<TransportInfo>& registry() {
  static std::vector<TransportInfo> list;  // by priority, lowest first
  return list;
}

}  // namespace

TransportRegistration::TransportRegistration(const TransportInfo& t) {
  auto& list = registry();
  for (const auto& other : list)
    if (other.priority == t.priority || std::string(other.name) == t.name) {
      std::fprintf(stderr, "kolo: transport '%s' (priority %d) cannot be registered: '%s' has priority %d\n", t.name,
                   t.priority, other.name, other.priority);
      std::abort();
    }
  const auto at = std::lower_bound(list.begin(), list.end(), t,
                                   [](const TransportInfo& x, const TransportInfo& y) { return x.priority < y.priority; });
  list.insert(at, t);
}

const std::vector<TransportInfo>& all_transports() { return registry(); }

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

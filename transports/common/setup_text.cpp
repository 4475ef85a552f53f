#include "transports/common/setup_text.hpp"

#include <cstring>

namespace kolo::transport {

const char* hello_status_text(HelloStatus s) {
  switch (s) {
    case HelloStatus::ok: return "ok";
    case HelloStatus::bad_magic: return "not a kolo connection";
    case HelloStatus::bad_version: return "protocol version differs (mixed kolo versions?)";
    case HelloStatus::bad_secret: return "wrong job secret (KOLO_SECRET differs between ranks?)";
    case HelloStatus::bad_group: return "the connection is for another group";
    case HelloStatus::bad_rank: return "unexpected or duplicate rank";
  }
  return "unknown";
}

uint64_t group_hash(const std::string& prefix) {
  // FNV-1a: only needs to tell groups apart, not resist attackers (the secret proof does that).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : prefix) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer.
  const char* msg = strerror_r(err, buf, sizeof buf);
  return std::string(msg) + " (errno " + std::to_string(err) + ")";
}

}  // namespace kolo::transport

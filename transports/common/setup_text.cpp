#include "transports/common/setup_text.hpp"

#include <cstring>

#include "common/hash.hpp"

namespace kolo::transport {

const char* hello_status_text(HelloStatus s) {
  switch (s) {
    case HelloStatus::ok: return "ok";
    case HelloStatus::bad_magic: return "not a kolo connection";
    case HelloStatus::bad_version: return "protocol version differs (mixed kolo versions?)";
    case HelloStatus::bad_secret: return "wrong job secret (KOLO_SECRET differs between ranks?)";
    case HelloStatus::bad_group: return "the connection is for another group";
    case HelloStatus::bad_rank: return "unexpected or duplicate rank";
    case HelloStatus::crossed: return "both ranks connected at once; the lower rank's connection is kept";
    case HelloStatus::tls_mismatch: return "one side has KOLO_TLS=1 and the other not (set it on every rank)";
  }
  return "unknown";
}

uint64_t group_hash(const std::string& prefix) { return common::fnv1a(prefix); }

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer.
  const char* msg = strerror_r(err, buf, sizeof buf);
  return std::string(msg) + " (errno " + std::to_string(err) + ")";
}

}  // namespace kolo::transport

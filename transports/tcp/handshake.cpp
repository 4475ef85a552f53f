#include "transports/tcp/handshake.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kolo/error.hpp"
#include "kolo/version.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/wire.hpp"

namespace kolo::tcp {

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
  // FNV-1a: only needs to tell groups apart, not resist attackers (the secret does that).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : prefix) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void send_hello(int fd, const transport::Bootstrap& b, int peer) {
  Hello h{};
  h.magic = kHelloMagic;
  h.protocol_version = static_cast<uint32_t>(kProtocolVersion);
  std::memcpy(h.secret, b.secret.data(), sizeof h.secret);
  h.group_hash = group_hash(b.prefix);
  h.src_rank = b.rank;
  h.dst_rank = peer;
  h.world_size = b.size;
  write_all_until(fd, &h, sizeof h, b.deadline);
}

void expect_hello_reply(int fd, const transport::Bootstrap& b, int peer) {
  HelloReply r{};
  try {
    read_all_until(fd, &r, sizeof r, b.deadline);
  } catch (const TimeoutError&) {
    throw TimeoutError("rank " + std::to_string(peer) + " did not answer the connection handshake of rank " +
                       std::to_string(b.rank) + " before the timeout");
  } catch (const Error& e) {
    throw PeerError("rank " + std::to_string(peer) + " closed the connection during the handshake: " + e.what(), peer);
  }
  if (r.magic != kHelloMagic || r.status != HelloStatus::ok)
    throw PeerError("rank " + std::to_string(peer) + " refused the connection from rank " + std::to_string(b.rank) +
                        ": " + hello_status_text(r.magic == kHelloMagic ? r.status : HelloStatus::bad_magic),
                    peer);
}

bool accept_hello(int fd, const transport::Bootstrap& b, const std::vector<bool>& want, int* peer, std::string* why) {
  Hello h{};
  // A caller that connects and says nothing must not stall setup for long.
  auto deadline = std::min(b.deadline, Clock::now() + std::chrono::seconds(10));
  try {
    read_all_until(fd, &h, sizeof h, deadline);
  } catch (const Error& e) {
    *why = std::string("no valid handshake: ") + e.what();
    return false;
  }
  HelloStatus st = HelloStatus::ok;
  if (h.magic != kHelloMagic) st = HelloStatus::bad_magic;
  else if (h.protocol_version != static_cast<uint32_t>(kProtocolVersion)) st = HelloStatus::bad_version;
  else if (std::memcmp(h.secret, b.secret.data(), sizeof h.secret) != 0) st = HelloStatus::bad_secret;
  else if (h.group_hash != group_hash(b.prefix) || h.world_size != b.size || h.dst_rank != b.rank) st = HelloStatus::bad_group;
  else if (h.src_rank < 0 || h.src_rank >= b.size || !want[static_cast<size_t>(h.src_rank)]) st = HelloStatus::bad_rank;
  HelloReply r{kHelloMagic, st};
  try {
    write_all_until(fd, &r, sizeof r, deadline);
  } catch (const Error&) {
    // The caller is gone; nothing to tell it.
  }
  if (st != HelloStatus::ok) {
    *why = std::string(hello_status_text(st)) + (h.magic == kHelloMagic ? " (claims rank " + std::to_string(h.src_rank) + ")" : "");
    return false;
  }
  *peer = h.src_rank;
  return true;
}

}  // namespace kolo::tcp

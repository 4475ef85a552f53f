// What the TCP transport puts on the wire: a handshake when a connection opens, then frames.
// Fixed-size little-endian structs (every supported host is little-endian x86-64/aarch64).
#pragma once
#include "transports/common/setup_text.hpp"
#include <cstdint>

namespace kolo::tcp {

constexpr uint32_t kHelloMagic = 0x4b4f4c4f;  // "KOLO"

// Sent by the connecting side. The acceptor checks magic, protocol version, the group, the ranks
// and the proof of the job secret, and answers with a HelloReply carrying its own proof
// (challenge-response both ways: transports/common/auth.hpp).
struct Hello {
  uint32_t magic;
  uint32_t protocol_version;
  uint8_t nonce[16];     // the connector's challenge
  uint64_t group_hash;  // hash of the group's store prefix: two groups never cross-connect
  int32_t src_rank;
  int32_t dst_rank;
  int32_t world_size;
  int32_t reserved;      // flags: kHelloTls
  uint8_t mac[32];       // connector's proof over its nonce and the acceptor's published one
};

// Hello::reserved: the connector has KOLO_TLS=1 and starts a TLS handshake after an ok reply.
constexpr int32_t kHelloTls = 1;

using transport::HelloStatus;  // transports/common/setup_text.hpp
using transport::hello_status_text;

// With status ok, the acceptor's proof over both nonces.
struct HelloReply {
  uint32_t magic;
  HelloStatus status;
  uint8_t mac[32];
};

enum class FrameKind : uint32_t { data = 1, bye = 2, abort = 3, resync = 4 };

// Precedes every message. For data, `bytes` of payload follow; for abort, a reason string of
// `bytes` bytes follows; bye has no payload. resync (a hand-over to a new group, Device::hand_over)
// has none either: its tag is {hash of the new group's prefix, the sender's rank there, its size},
// and it ends the old group's bytes in its direction.
struct FrameHeader {
  FrameKind kind;
  uint32_t reserved;
  uint64_t bytes;
  uint64_t tag[3];
};
static_assert(sizeof(FrameHeader) == 40);

constexpr uint64_t kMaxAbortReason = 4096;

}  // namespace kolo::tcp

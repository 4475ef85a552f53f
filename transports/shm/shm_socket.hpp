// The records on a shared-memory pair's control channel: one unix-domain SOCK_SEQPACKET
// connection in the abstract namespace (transports/common/seqpacket.hpp). The data never goes
// through it; it carries the setup handshake, then one-record messages: doorbells (wake a sleeping
// peer), abort notices and goodbyes. When a process dies the kernel closes its end, which is how a
// survivor learns of the death at once even while it sleeps.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "transports/common/fd.hpp"
#include "transports/common/setup_text.hpp"

namespace kolo::shm {

using Clock = std::chrono::steady_clock;
using transport::Fd;

constexpr uint32_t kHelloMagic = 0x4f534b4b;  // "KKSO"
constexpr uint32_t kReadyMagic = 0x59445252;  // "RRDY"

// First record in each direction. The connecting rank sends one; the accepting rank checks it
// (magic, version, group, ranks, and the proof of the job secret: transports/common/auth.hpp)
// and answers with its own, `status` set and its own proof in `mac`. Both carry
// the address and value of a word the peer may try to read with process_vm_readv: whether it
// reads back the right value decides if large messages may be read straight from our memory.
struct Hello {
  uint32_t magic;
  uint32_t protocol_version;
  uint8_t nonce[16];  // the connector's challenge (unused in replies)
  uint64_t group_hash;
  int32_t src_rank;
  int32_t dst_rank;
  int32_t world_size;
  uint32_t status;  // replies: transport::HelloStatus
  uint64_t probe_addr;
  uint64_t probe_value;
  uint8_t mac[32];    // proof over the connector's nonce and the acceptor's published one
};

// Second record, both ways, once every handshake is done: whether the sender of this record
// could read the receiver's probe word (so the receiver may describe large messages to it
// instead of copying them through the ring).
struct Ready {
  uint32_t magic;
  uint32_t can_read_you;
};

// Control records after setup: one byte of kind, then for abort the reason, for resync a
// Resync (a hand-over to a new group, Device::hand_over: it ends the old group's records).
enum class Control : char { doorbell = 'D', bye = 'B', abort = 'A', resync = 'R' };
struct Resync {
  char kind;           // Control::resync
  char pad[7];
  uint64_t token;      // hash of the new group's prefix
  int32_t rank, size;  // the sender's rank in the new group, and its size
  uint64_t cut;        // the sender's next slot use: every earlier one is the old group's
  uint64_t described;  // the sender's large messages described so far (the cma_done count)
};
constexpr size_t kMaxAbortReason = 4096;

}  // namespace kolo::shm

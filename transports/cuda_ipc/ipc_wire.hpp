// The records of a cuda_ipc pair's control socket (ipc_pair.hpp). The data never goes through
// the socket: a message record names where its bytes lie in the sender's device memory (a
// registration generation and offset: the sender's staging ring, or the sender's own buffer),
// and the receiver copies them from its mapping of that memory.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kolo::cuda_ipc::wire {

constexpr uint32_t kHelloMagic = 0x5049434b;  // "KCIP"
constexpr uint32_t kProtocolVersion = 1;
constexpr size_t kMaxAbortReason = 4096;

// The setup's only exchange, one each way: the connector's hello carries its challenge and its
// proof of the job secret (transports/common/auth.hpp); the acceptor's reply carries its
// verdict (`status`) and its own proof.
struct Hello {
  uint32_t magic;
  uint32_t protocol_version;
  uint8_t nonce[16];
  uint64_t group_hash;
  int32_t src_rank;
  int32_t dst_rank;
  int32_t world_size;
  uint32_t status;  // replies: transport::HelloStatus
  uint8_t mac[32];
};

enum class Kind : uint8_t {
  message = 'M',  // tag, bytes, gen, offset: the next message, readable there until acked
  ack = 'K',      // the receiver copied the oldest unacknowledged message: its memory is free
  retire = 'X',   // gen: the sender's registration is gone, close its mapping
  bye = 'B',      // orderly close: nothing more comes
  abort = 'A',    // followed by the reason's text, instead of the fields below
};

struct Record {
  uint8_t kind;
  uint8_t pad[7];
  uint64_t tag[3];
  uint64_t bytes;
  uint64_t gen;
  uint64_t offset;
};

}  // namespace kolo::cuda_ipc::wire

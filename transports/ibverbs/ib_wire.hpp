// What the ibverbs transport exchanges: connection data (through the store) and the header at
// the start of every ring slot. Little-endian hosts only, like the TCP transport.
//
// Data path, per pair and direction: the receiver owns a ring of `nslots` slots of `slot_bytes`
// (header included), registered for remote writes. The sender copies a chunk of a message into
// the same slot of its own registered staging ring and RDMA-WRITEs it, with immediate data, into
// the receiver's slot: the immediate consumes one of the receiver's posted (zero-length)
// receives and so tells it that slot `seq % nslots` is full. Slots fill and drain in order.
// Credits: once the receiver has copied slots out it returns their count in the immediate of a
// zero-length SEND; the sender never writes more than `nslots` slots ahead of the credits it got.
// Each side keeps 2 x nslots receives posted (at most nslots data writes plus at most nslots
// credit messages can be outstanding towards it), so a receive is never missing.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kolo::ib {

constexpr uint32_t kConnMagic = 0x4b4f4942;  // "KOIB"

struct ConnInfo {
  uint32_t magic;
  uint32_t qpn;
  uint32_t psn;
  uint16_t lid;
  uint8_t mtu;        // ibv_mtu enum value
  uint8_t roce;
  uint8_t gid[16];
  uint64_t ring_addr;  // receive ring this rank keeps for the peer
  uint32_t ring_rkey;
  uint32_t slot_bytes;
  uint32_t nslots;
  uint32_t reserved[3];
};
static_assert(sizeof(ConnInfo) == 64);

struct SlotHeader {
  uint64_t tag[3];
  uint64_t msg_bytes;    // whole message
  uint64_t offset;       // of this chunk in the message
  uint64_t chunk_bytes;  // payload bytes after the header
  uint64_t seq;          // chunk sequence number on this pair, a check on ordering
  uint64_t reserved;
};
constexpr size_t kSlotHeaderBytes = 64;
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

}  // namespace kolo::ib

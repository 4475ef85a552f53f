// What lives in shared memory: the structures both processes of a pair read and write.
//
// Every rank owns one segment holding an inbound ring per local peer. A ring carries one
// direction (sender -> the segment's owner) as a circular array of fixed-size, cache-line-aligned
// slots. Slot use k (k = 0, 1, 2, ...) lives in slot k % nslots; the sender fills it and then
// publishes it by storing k + 1 into the slot's `seq` (release); the receiver sees it with an
// acquire load, copies the payload out and frees the slot by advancing `tail`. No system call
// on this path: wake-ups go through the pair's socket only when the other side announced that
// it sleeps (the *_waiting flags).
#pragma once
#include <atomic>
#include <cstddef>  // offsetof
#include <cstdint>

namespace kolo::shm {

constexpr size_t kLine = 64;
constexpr uint32_t kSegmentMagic = 0x4d53484b;  // "KHSM"
// 2: the ring's fields for helped remote reads; 3: flags; 4: small messages in the header's line
constexpr uint32_t kLayoutVersion = 4;

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

struct alignas(kLine) SegmentHeader {
  uint32_t magic;
  uint32_t version;
  int32_t owner_rank;
  uint32_t nrings;
  uint64_t total_bytes;
  uint64_t ring_bytes;  // every ring (control block + slots) takes this many bytes
  uint32_t flags;       // SegmentFlags, set before the segment is published
};

enum SegmentFlags : uint32_t {
  // The owner issues a global membarrier after raising a waiting flag and before it looks at its
  // rings again (shm_fence.hpp), and registered for it.
  kWaiterUsesMembarrier = 1,
};

// One ring's control block. Each field that one side writes while the other polls it sits on a
// cache line of its own, so that polling one never drags the other's line back and forth.
struct RingControl {
  // Immutable after the owner initialised the segment.
  alignas(kLine) int32_t sender_rank;
  int32_t receiver_rank;
  uint32_t slot_bytes;
  uint32_t nslots;
  // Slot uses the receiver has consumed: the sender may reuse slot uses below tail + nslots.
  alignas(kLine) std::atomic<uint64_t> tail;
  // Large messages the receiver has finished reading straight from the sender's memory.
  alignas(kLine) std::atomic<uint64_t> cma_done;
  // The receiver is about to sleep until a slot is published: the sender writes a doorbell.
  alignas(kLine) std::atomic<uint32_t> receiver_waiting;
  // The sender is about to sleep until a slot is freed or a large message was read.
  alignas(kLine) std::atomic<uint32_t> sender_waiting;
  // The sender aborted: a large message it described may no longer be in its memory.
  alignas(kLine) std::atomic<uint32_t> sender_aborted;
  // A described message is copied by both sides when the sender has nothing else to do (it
  // polls while it waits for the read anyway): its pieces of kRemotePieceBytes are claimed one at
  // a time from help_claim, (message number mod 2^32) << 32 | next piece, by the receiver
  // (process_vm_readv) and the sender (process_vm_writev into help_dst). The receiver names the
  // message (release) after writing help_dst and zeroing the counters below; a claim is a CAS, so
  // it can never take a piece of another message.
  alignas(kLine) std::atomic<uint64_t> help_claim;
  uint64_t help_dst;  // where the message named in help_claim goes, in the receiver's memory
  // Bytes of the named message the sender has written (release, after each piece).
  alignas(kLine) std::atomic<uint64_t> help_done_bytes;
  // A piece the sender claimed but could not write (piece + 1; 0: none): the receiver reads it.
  std::atomic<uint64_t> help_returned;
};

// The unit of a remote read: the receiver reads, and the sender writes, at most this much per
// call, so that one huge message does not hold up the other pairs (and pieces this size read
// faster than one call for the whole message: fewer pages pinned at once). Both sides must agree
// on it: it is part of the layout.
constexpr size_t kRemotePieceBytes = size_t(1) << 20;
constexpr uint64_t help_claim_of(uint64_t message, uint64_t piece) { return (message << 32) | piece; }

enum class SlotKind : uint32_t {
  data = 1,   // the first (or only) piece of a message: carries the tag and the total size
  more = 2,   // a later piece of the message that the previous slots began
  cma = 3,    // a large message's descriptor: the receiver reads it from the sender's memory
  small = 4,  // a whole message of at most kSmallBytes, in the header's own cache line
};

// The first cache line of every slot; the payload follows at kSlotHeaderBytes.
struct SlotHeader {
  std::atomic<uint64_t> seq;  // k + 1 once slot use k is published
  SlotKind kind;
  uint32_t len;    // payload bytes in this slot
  uint64_t tag[3];
  // From here to the end of the line a small slot holds its message instead (kSmallOffset).
  uint64_t total;  // data, cma: the message's size
  uint64_t addr;   // cma: the message's address in the sender
};
constexpr size_t kSlotHeaderBytes = kLine;
static_assert(sizeof(SlotHeader) <= kSlotHeaderBytes);

// A small slot's message starts where `total` would be and fills the header's line: the
// receiver, which polls `seq`, gets the message with the same cache-line transfer that shows it
// the slot is published. A message in the payload area took a second transfer (the two went one
// after the other: the payload is read only once `seq` says it is there), and on a machine whose
// cores are far apart that doubled a small collective's time (docs/PERFORMANCE.md).
constexpr size_t kSmallOffset = 40;
constexpr size_t kSmallBytes = kLine - kSmallOffset;
static_assert(offsetof(SlotHeader, total) == kSmallOffset, "a small message overlays total and addr");

constexpr size_t round_up_line(size_t n) { return (n + kLine - 1) / kLine * kLine; }
constexpr size_t kSegmentHeaderBytes = round_up_line(sizeof(SegmentHeader));
constexpr size_t kRingControlBytes = round_up_line(sizeof(RingControl));

// How big a ring and a segment are for a given geometry.
constexpr size_t ring_bytes(size_t slot_bytes, size_t nslots) { return kRingControlBytes + slot_bytes * nslots; }
constexpr size_t segment_bytes(size_t nrings, size_t slot_bytes, size_t nslots) {
  return kSegmentHeaderBytes + nrings * ring_bytes(slot_bytes, nslots);
}

// A process-local view of one ring inside a mapped segment.
struct RingView {
  RingControl* ctl = nullptr;
  char* slots = nullptr;
  uint32_t slot_bytes = 0;
  uint32_t nslots = 0;

  SlotHeader* slot(uint64_t use) const {
    // A mask for the usual power-of-two ring (KOLO_SHM_SLOTS' default): a 64-bit division cost
    // 10-40 cycles on every send, receive and poll of an empty ring.
    const uint64_t i = (nslots & (nslots - 1)) == 0 ? use & (nslots - 1) : use % nslots;
    return reinterpret_cast<SlotHeader*>(slots + static_cast<size_t>(i) * slot_bytes);
  }
  static char* payload(SlotHeader* h) { return reinterpret_cast<char*>(h) + kSlotHeaderBytes; }
  static char* small_payload(SlotHeader* h) { return reinterpret_cast<char*>(h) + kSmallOffset; }
  size_t payload_bytes() const { return slot_bytes - kSlotHeaderBytes; }
};

}  // namespace kolo::shm

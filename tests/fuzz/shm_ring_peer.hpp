// A fake peer of the shared-memory transport for the ring tests and the ring fuzzer: both rings
// of one pair in ordinary (zeroed, aligned) memory, a socketpair as the control socket, and a
// device adopted over them (ShmDevice::adopt). The test writes and publishes slots as a peer
// would, however wrong, and drives the device.
#pragma once
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "transports/shm/shm_device.hpp"
#include "transports/shm/shm_layout.hpp"

namespace kolo::shmfake {

struct Ring {
  void* mem = nullptr;
  shm::RingView view;
  Ring(uint32_t slot_bytes, uint32_t nslots) {
    const size_t bytes = shm::ring_bytes(slot_bytes, nslots);
    mem = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (mem == nullptr) std::abort();
    std::memset(mem, 0, bytes);
    view.ctl = static_cast<shm::RingControl*>(mem);
    view.ctl->sender_rank = 0;
    view.ctl->receiver_rank = 1;
    view.ctl->slot_bytes = slot_bytes;
    view.ctl->nslots = nslots;
    view.slots = static_cast<char*>(mem) + shm::kRingControlBytes;
    view.slot_bytes = slot_bytes;
    view.nslots = nslots;
  }
  ~Ring() { std::free(mem); }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
};

struct SlotSpec {
  shm::SlotKind kind;
  uint32_t len;
  uint64_t total;
  uint64_t tag0;
  const void* payload;     // copied into the slot, at most the slot's payload room
  size_t payload_bytes;
};

// Rank 1's device with one pair to rank 0, whose slots the test writes.
class RingPeer {
 public:
  RingPeer(transport::FailureSink* sink, uint32_t slot_bytes = 256, uint32_t nslots = 4)
      : in_(slot_bytes, nslots), out_(slot_bytes, nslots) {
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp_) != 0) std::abort();
    shm::PairSetup s;
    s.peer = 0;
    s.in = in_.view;
    s.out = out_.view;
    s.sock = shm::Fd(sp_[0]);
    s.peer_pid = -1;  // no cross-memory reads: a descriptor slot fails to read
    dev_ = shm::ShmDevice::adopt(2, sink, std::move(s));
  }
  ~RingPeer() {
    dev_.reset();
    ::close(sp_[1]);
  }

  transport::Device& device() { return *dev_; }
  transport::Pair& pair() { return *dev_->pair(0); }
  // Whether the next slot use is free (the receiver consumed the one nslots before it).
  bool can_write() const { return next_ < in_.view.ctl->tail.load() + in_.view.nslots; }
  // Writes and publishes slot use next_.
  void publish(const SlotSpec& s) {
    shm::SlotHeader* h = in_.view.slot(next_);
    h->kind = s.kind;
    h->len = s.len;
    h->tag[0] = s.tag0;
    h->tag[1] = h->tag[2] = 0;
    if (s.kind == shm::SlotKind::small) {  // its bytes overlay total and addr
      if (s.payload_bytes > 0)
        std::memcpy(shm::RingView::small_payload(h), s.payload, std::min<size_t>(s.payload_bytes, shm::kSmallBytes));
    } else {
      h->total = s.total;
      h->addr = 0;
      if (s.payload_bytes > 0)
        std::memcpy(shm::RingView::payload(h), s.payload, std::min<size_t>(s.payload_bytes, in_.view.payload_bytes()));
    }
    h->seq.store(next_ + 1, std::memory_order_release);
    ++next_;
  }
  uint32_t payload_room() const { return static_cast<uint32_t>(in_.view.payload_bytes()); }

 private:
  Ring in_, out_;
  int sp_[2];
  uint64_t next_ = 0;
  std::unique_ptr<shm::ShmDevice> dev_;
};

}  // namespace kolo::shmfake

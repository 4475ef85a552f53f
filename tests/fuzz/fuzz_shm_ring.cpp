// libFuzzer target: the shared-memory transport's ring reader (ShmPair) fed arbitrary slots by a
// fake peer (shm_ring_peer.hpp: rings in ordinary memory, 4 slots of 256 bytes), with up to three
// receives posted.
// Input: byte 0 = number of receives (low 2 bits); per receive 2 bytes of size and 1 byte of tag;
// then slots, each 1 byte kind, 2 bytes len, 2 bytes total, 1 byte tag, followed by its payload
// (min(len, the slot's room) bytes, as far as the input goes).
// Invariants, beyond no crash and no sanitizer report (a read past a slot is one): an independent
// reading of the slots says which receives complete with which bytes and which fail on a
// mismatched first slot; the pair agrees exactly, and every failure names rank 0.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/shm_ring_peer.hpp"

using namespace kolo;

namespace {

struct Sink : transport::FailureSink {
  void peer_failed(int, transport::Failure, const std::string&) override {}
};

struct Slot {
  shm::SlotKind kind;
  uint32_t len;
  uint64_t total;
  uint64_t tag;
  std::vector<uint8_t> payload;  // the slot's whole payload room
};

struct Recv {
  std::vector<uint8_t> buf;
  transport::Tag tag;
  transport::Request req;
};

enum class Expect { complete, mismatch, unsettled };

// The oracle: reads the published slots as the ring layout says a sender writes them.
std::vector<Expect> expected(const std::vector<Slot>& slots, size_t published, const std::vector<Recv>& recvs,
                             uint32_t room, std::vector<std::vector<uint8_t>>* payloads) {
  std::vector<Expect> out(recvs.size(), Expect::unsettled);
  payloads->assign(recvs.size(), {});
  size_t i = 0;
  for (size_t next = 0; next < recvs.size() && i < published;) {
    const Slot& first = slots[i++];
    const bool small = first.kind == shm::SlotKind::small;
    const uint64_t total = small ? first.len : first.total;  // a small slot's message is all there
    if ((first.kind != shm::SlotKind::data && first.kind != shm::SlotKind::cma && !small) || first.len > total ||
        first.len > (small ? shm::kSmallBytes : room))
      break;  // corrupt: the pair fails
    transport::Tag t;
    t.w[0] = first.tag;
    if (!(t == recvs[next].tag) || total != recvs[next].buf.size()) {
      out[next] = Expect::mismatch;
      break;
    }
    if (first.kind == shm::SlotKind::cma) {
      if (first.total > 0) break;  // no peer to read from: the read fails
      out[next++] = Expect::complete;  // nothing to read: done at once (a sender never sends this)
      continue;
    }
    std::vector<uint8_t> got(first.payload.begin(), first.payload.begin() + first.len);
    uint64_t left = total - first.len;
    bool broken = false;
    while (left > 0 && i < published) {
      const Slot& more = slots[i++];
      if (more.kind != shm::SlotKind::more || more.len > left || more.len > room) {
        broken = true;
        break;
      }
      got.insert(got.end(), more.payload.begin(), more.payload.begin() + more.len);
      left -= more.len;
    }
    if (broken || left > 0) break;
    (*payloads)[next] = std::move(got);
    out[next++] = Expect::complete;
  }
  return out;
}

uint32_t u16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Sink sink;
  shmfake::RingPeer peer(&sink);
  const uint32_t room = peer.payload_room();
  size_t pos = 1;
  std::vector<Recv> recvs(data[0] & 3);
  for (Recv& r : recvs) {
    if (size - pos < 3) return 0;
    r.buf.assign(u16(data + pos), 0);
    r.tag.w[0] = data[pos + 2];
    pos += 3;
  }
  std::vector<Slot> slots;
  while (size - pos >= 6 && slots.size() < 64) {
    Slot s{static_cast<shm::SlotKind>(data[pos]), u16(data + pos + 1), u16(data + pos + 3), data[pos + 5],
           std::vector<uint8_t>(room, 0)};
    pos += 6;
    const size_t take = std::min<size_t>({s.len, room, size - pos});
    std::memcpy(s.payload.data(), data + pos, take);
    pos += take;
    slots.push_back(std::move(s));
  }
  for (Recv& r : recvs) peer.pair().post_recv(r.buf.data(), r.buf.size(), r.tag, &r.req);
  size_t published = 0;
  for (int idle = 0; idle < 3;) {
    bool moved = false;
    if (published < slots.size() && peer.can_write()) {
      const Slot& s = slots[published++];
      peer.publish({s.kind, s.len, s.total, s.tag, s.payload.data(), s.payload.size()});
      moved = true;
    }
    moved |= peer.device().poll();
    idle = moved ? 0 : idle + 1;
  }
  std::vector<std::vector<uint8_t>> payloads;
  const std::vector<Expect> want = expected(slots, published, recvs, room, &payloads);
  for (size_t i = 0; i < recvs.size(); ++i) {
    const transport::Request& r = recvs[i].req;
    if (r.transferred > r.bytes) std::abort();
    if (r.state == transport::Request::State::failed && r.detail.find("rank 0") == std::string::npos) std::abort();
    switch (want[i]) {
      case Expect::complete:
        if (r.state != transport::Request::State::done || recvs[i].buf != payloads[i]) std::abort();
        break;
      case Expect::mismatch:
        if (r.state != transport::Request::State::failed) std::abort();
        break;
      case Expect::unsettled:
        if (r.state == transport::Request::State::done) std::abort();
        break;
    }
  }
  return 0;
}

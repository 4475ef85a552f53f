// What a peer writes into a shared-memory ring is input like any other: slot lengths, sizes and
// kinds are checked before use. A fake peer (tests/fuzz/shm_ring_peer.hpp) writes slots into
// rings in ordinary memory; the receiving pair must deliver well-formed messages intact and fail
// malformed ones naming the peer, without reading past a slot or allocating what a slot claims.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <vector>

#include "tests/fuzz/shm_ring_peer.hpp"
#include "transports/transport.hpp"

using namespace kolo;
using transport::Request;

namespace {

struct Sink : transport::FailureSink {
  void peer_failed(int, transport::Failure, const std::string&) override {}
};

transport::Tag tag(uint64_t a) {
  transport::Tag t;
  t.w[0] = a;
  return t;
}

// Polls until `r` settles (bounded).
void drive(transport::Device& dev, const Request& r) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (r.state == Request::State::pending && std::chrono::steady_clock::now() < until) dev.poll();
}

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

TEST(ShmRingInput, WellFormedMessageOverTwoSlotsArrivesIntact) {
  Sink sink;
  shmfake::RingPeer peer(&sink);
  const uint32_t room = peer.payload_room();
  const auto msg = bytes(room + 10, 3);
  std::vector<uint8_t> got(msg.size());
  Request r;
  peer.pair().post_recv(got.data(), got.size(), tag(7), &r);
  peer.publish({shm::SlotKind::data, room, msg.size(), 7, msg.data(), room});
  peer.publish({shm::SlotKind::more, 10, 0, 0, msg.data() + room, 10});
  drive(peer.device(), r);
  ASSERT_EQ(r.state, Request::State::done) << r.detail;
  EXPECT_EQ(got, msg);
}

TEST(ShmRingInput, SmallMessageInTheHeaderLineArrivesIntact) {
  // A message of up to kSmallBytes travels in the slot header's own cache line.
  Sink sink;
  shmfake::RingPeer peer(&sink);
  for (size_t n : {size_t{0}, size_t{1}, size_t{8}, shm::kSmallBytes}) {
    const auto msg = bytes(n, static_cast<uint8_t>(n + 5));
    std::vector<uint8_t> got(n, 0xee);
    Request r;
    peer.pair().post_recv(got.data(), got.size(), tag(9), &r);
    peer.publish({shm::SlotKind::small, static_cast<uint32_t>(n), 0, 9, msg.data(), n});
    drive(peer.device(), r);
    ASSERT_EQ(r.state, Request::State::done) << n << " bytes: " << r.detail;
    EXPECT_EQ(got, msg) << n << " bytes";
  }
}

TEST(ShmRingInput, SmallSlotClaimingMoreThanItsLineFails) {
  // kSmallBytes + 1 would copy past the header's line into the payload area the sender did not
  // write (and, for a slot at the ring's end, toward the next slot).
  Sink sink;
  shmfake::RingPeer peer(&sink);
  std::vector<uint8_t> got(shm::kSmallBytes + 1);
  const auto fill = bytes(got.size(), 1);
  Request r;
  peer.pair().post_recv(got.data(), got.size(), tag(7), &r);
  peer.publish({shm::SlotKind::small, static_cast<uint32_t>(got.size()), 0, 7, fill.data(), fill.size()});
  drive(peer.device(), r);
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_NE(r.detail.find("corrupt shared-memory ring from rank 0"), std::string::npos) << r.detail;
}

TEST(ShmRingInput, SmallMessageOfAnotherSizeIsAMismatch) {
  Sink sink;
  shmfake::RingPeer peer(&sink);
  std::vector<uint8_t> got(16);
  const auto msg = bytes(8, 1);
  Request r;
  peer.pair().post_recv(got.data(), got.size(), tag(7), &r);
  peer.publish({shm::SlotKind::small, 8, 0, 7, msg.data(), msg.size()});
  drive(peer.device(), r);
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, transport::Failure::size_mismatch);
  EXPECT_EQ(r.got_bytes, 8u);
}

TEST(ShmRingInput, ContinuationLongerThanASlotFailsNamingThePeer) {
  Sink sink;
  shmfake::RingPeer peer(&sink);
  const uint32_t room = peer.payload_room();
  // Three slots' worth announced; the second slot claims the remaining two at once, which would
  // copy a whole slot's length past its end.
  std::vector<uint8_t> got(3 * size_t{room});
  const auto fill = bytes(room, 1);
  Request r;
  peer.pair().post_recv(got.data(), got.size(), tag(7), &r);
  peer.publish({shm::SlotKind::data, room, got.size(), 7, fill.data(), room});
  peer.publish({shm::SlotKind::more, 2 * room, 0, 0, fill.data(), room});
  drive(peer.device(), r);
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_NE(r.detail.find("corrupt shared-memory ring from rank 0"), std::string::npos) << r.detail;
}

TEST(ShmRingInput, FirstSlotLongerThanItsRoomFails) {
  Sink sink;
  shmfake::RingPeer peer(&sink);
  const uint32_t room = peer.payload_room();
  std::vector<uint8_t> got(4 * size_t{room});
  Request r;
  peer.pair().post_recv(got.data(), got.size(), tag(7), &r);
  peer.publish({shm::SlotKind::data, room + 1, got.size(), 7, nullptr, 0});
  drive(peer.device(), r);
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_NE(r.detail.find("rank 0"), std::string::npos) << r.detail;
}

TEST(ShmRingInput, TerabyteClaimFailsTheReceiveWithoutAllocating) {
  Sink sink;
  shmfake::RingPeer peer(&sink);
  std::vector<uint8_t> got(16);
  Request r;
  peer.pair().post_recv(got.data(), got.size(), tag(7), &r);
  peer.publish({shm::SlotKind::data, 0, uint64_t{1} << 40, 7, nullptr, 0});
  drive(peer.device(), r);
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, transport::Failure::size_mismatch);
  EXPECT_EQ(r.got_bytes, uint64_t{1} << 40);
  EXPECT_NE(r.detail.find("rank 0"), std::string::npos) << r.detail;
}

TEST(ShmRingInput, UnknownSlotKindFailsNamingThePeer) {
  Sink sink;
  shmfake::RingPeer peer(&sink);
  std::vector<uint8_t> got(16);
  Request r;
  peer.pair().post_recv(got.data(), got.size(), tag(7), &r);
  peer.publish({static_cast<shm::SlotKind>(99), 16, 16, 7, got.data(), 16});
  drive(peer.device(), r);
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_NE(r.detail.find("corrupt shared-memory ring from rank 0"), std::string::npos) << r.detail;
}

}  // namespace

// The transport conformance suite's look ahead (fixture: conformance_fixture.hpp; which
// transports run it: transport_conformance_test.cpp): peek_incoming, which an any-source
// receive asks of every pair, shows the next message's tag and size without consuming it, and
// shows nothing while a posted receive owns the next message.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "conformance_fixture.hpp"

namespace kolo::conformance {
namespace {

// Polls `dev` until the pair to `peer` shows the header of a message (peek_incoming), or fails
// the test after 10 s. The pair is asked anew each time: a lazy device hands out another one
// once connected.
void poll_until_peeked(transport::Device& dev, int peer, Tag* got, uint64_t* bytes) {
  auto deadline = Clock::now() + 10s;
  while (!dev.pair(peer)->peek_incoming(got, bytes)) {
    ASSERT_LT(Clock::now(), deadline) << "no header arrived";
    if (!dev.poll()) std::this_thread::sleep_for(50us);
  }
}

}  // namespace

// peek_incoming (the any-source receive's look at a pair): false before anything arrived; once
// a header has arrived its tag and size, as often as asked, without consuming anything: a
// receive posted afterwards gets the message whole. At sizes that take each transport's paths:
// empty, one slot or read-ahead, several slots, and large (read from the sender's memory by
// shm, straight into the buffer by tcp).
TEST_P(TransportConformance, PeekShowsTheNextHeaderWithoutConsumingIt) {
  auto ranks = connect_all(2);
  for (size_t size : {size_t(0), size_t(40), size_t(100000), size_t(2 << 20) + 3}) {
    SCOPED_TRACE("size " + std::to_string(size));
    Tag got;
    uint64_t got_bytes = 12345;
    for (int i = 0; i < 5; ++i) ranks[1]->dev->poll();
    EXPECT_FALSE(ranks[1]->dev->pair(0)->peek_incoming(&got, &got_bytes)) << "nothing was sent yet";
    Buf<uint8_t> out(size), in(size, 0xEE);
    for (size_t j = 0; j < size; ++j) out.host[j] = static_cast<uint8_t>((j * 37 + size) & 0xff);
    out.push();
    Request s;
    std::thread sender([&] {
      ranks[0]->dev->pair(1)->post_send(out.data(), size, tag(size + 1), &s);
      drive(*ranks[0]->dev, {&s});
    });
    poll_until_peeked(*ranks[1]->dev, 0, &got, &got_bytes);
    EXPECT_TRUE(got == tag(size + 1));
    EXPECT_EQ(got_bytes, size);
    // Looking again, after more polling, shows the same message: nothing was taken.
    for (int i = 0; i < 20; ++i) ranks[1]->dev->poll();
    Tag again;
    uint64_t again_bytes = 0;
    ASSERT_TRUE(ranks[1]->dev->pair(0)->peek_incoming(&again, &again_bytes));
    EXPECT_TRUE(again == tag(size + 1));
    EXPECT_EQ(again_bytes, size);
    Request r;
    ranks[1]->dev->pair(0)->post_recv(in.data(), size, tag(size + 1), &r);
    drive(*ranks[1]->dev, {&r});
    sender.join();
    EXPECT_EQ(s.state, Request::State::done);
    EXPECT_EQ(r.state, Request::State::done) << r.detail;
    EXPECT_TRUE(in.pull() == out.host) << "the message did not arrive whole after the peek";
    EXPECT_FALSE(ranks[1]->dev->pair(0)->peek_incoming(&got, &got_bytes)) << "the message was received";
  }
}

// A posted receive owns the next message: peek says false while one is posted, even once the
// message is there; after it completes, peek shows the message behind it.
TEST_P(TransportConformance, PeekIsFalseWhileAReceiveIsPosted) {
  auto ranks = connect_all(2);
  Buf<int> a(300, 1), b(77, 2), got_a(300, 0), got_b(77, 0);
  Request ra;
  ranks[1]->dev->pair(0)->post_recv(got_a.data(), got_a.bytes(), tag(1), &ra);
  Tag got;
  uint64_t got_bytes = 0;
  EXPECT_FALSE(ranks[1]->dev->pair(0)->peek_incoming(&got, &got_bytes));
  Request sa, sb;
  std::thread sender([&] {
    ranks[0]->dev->pair(1)->post_send(a.data(), a.bytes(), tag(1), &sa);
    ranks[0]->dev->pair(1)->post_send(b.data(), b.bytes(), tag(2), &sb);
    drive(*ranks[0]->dev, {&sa, &sb});
  });
  auto deadline = Clock::now() + 10s;
  while (ra.state == Request::State::pending) {
    ASSERT_LT(Clock::now(), deadline);
    EXPECT_FALSE(ranks[1]->dev->pair(0)->peek_incoming(&got, &got_bytes)) << "peek saw past a posted receive";
    if (!ranks[1]->dev->poll()) std::this_thread::sleep_for(50us);
  }
  EXPECT_EQ(ra.state, Request::State::done) << ra.detail;
  EXPECT_EQ(got_a.pull(), a.host);
  poll_until_peeked(*ranks[1]->dev, 0, &got, &got_bytes);
  EXPECT_TRUE(got == tag(2));
  EXPECT_EQ(got_bytes, b.bytes());
  Request rb;
  ranks[1]->dev->pair(0)->post_recv(got_b.data(), got_b.bytes(), tag(2), &rb);
  drive(*ranks[1]->dev, {&rb});
  sender.join();
  EXPECT_EQ(rb.state, Request::State::done) << rb.detail;
  EXPECT_EQ(got_b.pull(), b.host);
}

}  // namespace kolo::conformance

// The transport conformance suite's hand-over (fixture: conformance_fixture.hpp; which
// transports run it: transport_conformance_test.cpp). Device::hand_over is how
// ProcessGroup::shrink keeps the survivors' connections: after an abort with traffic in flight
// both ways, the new group sees none of the old group's bytes, a peer that dies during the
// hand-over or gave up on the new group elsewhere is named at once (not by the deadline), and a
// receiver never completes a read of an aborted sender's reused buffer. A transport that hands
// nothing over skips, saying so (a shrink connects it anew); TLS connections are never handed
// over.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kolo/error.hpp"
#include "transports/setup_failure.hpp"
#include "conformance_fixture.hpp"

namespace kolo::conformance {
namespace {

// The two survivors' devices in the new group (new ranks 0 and 1), each with its failure sink.
struct Survivors {
  std::unique_ptr<transport::Device> dev[2];
  Sink sink[2];
};

// One message each way between ranks a and b: lazily, that is what connects them.
void exchange_one(std::vector<std::unique_ptr<Rank>>& ranks, int a, int b) {
  Buf<int> x(1, a), y(1, b), got_x(1, -1), got_y(1, -1);
  Request s1, r1, s2, r2;
  ranks[static_cast<size_t>(a)]->dev->pair(b)->post_send(x.data(), x.bytes(), tag(3), &s1);
  ranks[static_cast<size_t>(b)]->dev->pair(a)->post_recv(got_x.data(), got_x.bytes(), tag(3), &r1);
  ranks[static_cast<size_t>(b)]->dev->pair(a)->post_send(y.data(), y.bytes(), tag(4), &s2);
  ranks[static_cast<size_t>(a)]->dev->pair(b)->post_recv(got_y.data(), got_y.bytes(), tag(4), &r2);
  drive(*ranks[static_cast<size_t>(a)]->dev, {&s1, &r2}, ranks[static_cast<size_t>(b)]->dev.get());
  drive(*ranks[static_cast<size_t>(b)]->dev, {&s2, &r1}, ranks[static_cast<size_t>(a)]->dev.get());
  ASSERT_EQ(got_x.pull()[0], a);
  ASSERT_EQ(got_y.pull()[0], b);
}

// Ranks 0 and 2 of three carry their connection over into a group of two (new ranks 0 and 1),
// rank 1 left out, as a shrink without rank 1 does. Before the abort, traffic is in flight both
// ways between them: messages nobody received yet (small, several slots, and `large` bytes),
// a receive half done, and a receive still waiting. Returns false (the transport hands nothing
// over) when either end does not offer the pair after the abort.
bool abort_with_traffic_and_hand_over(std::vector<std::unique_ptr<Rank>>& ranks, size_t large, Survivors* out,
                                      std::string* why_not) {
  const int old_of[2] = {0, 2};
  exchange_one(ranks, 0, 2);
  // Old messages: both ways, never received (a receive for them only on one side, with another
  // tag: a mismatch would fail it, which the check below shows as a failed receive, not data).
  std::vector<std::vector<uint8_t>> old_out[2];
  std::deque<Request> sends[2];
  for (int i = 0; i < 2; ++i) {
    const int me = old_of[i], peer = old_of[1 - i];
    for (size_t n : {size_t(12), size_t(3000), size_t(70000), large}) {
      old_out[i].emplace_back(n, static_cast<uint8_t>(0xA0 + i));
      sends[i].emplace_back();
      ranks[static_cast<size_t>(me)]->dev->pair(peer)->post_send(old_out[i].back().data(), n, tag(1000 + n), &sends[i].back());
    }
  }
  // Rank 2 takes part of rank 0's first messages (a receive of the first one, done or not), and
  // posts one more that never matches.
  std::vector<uint8_t> first(12), never(5);
  Request r_first, r_never;
  ranks[2]->dev->pair(0)->post_recv(first.data(), first.size(), tag(1000 + 12), &r_first);
  ranks[2]->dev->pair(0)->post_recv(never.data(), never.size(), tag(77), &r_never);
  for (int k = 0; k < 20; ++k)
    for (int r = 0; r < 3; ++r) ranks[static_cast<size_t>(r)]->dev->poll();
  // Every rank aborts: the old group ends with all of that in flight.
  for (int r = 0; r < 3; ++r) ranks[static_cast<size_t>(r)]->dev->abort("0\nP\nrank " + std::to_string(r) + " shrinks");
  for (int i = 0; i < 2; ++i)
    for (auto& q : sends[i]) EXPECT_NE(q.state, Request::State::pending);
  for (int i = 0; i < 2; ++i) {
    const auto offered = ranks[static_cast<size_t>(old_of[i])]->dev->reusable_peers();
    if (std::find(offered.begin(), offered.end(), old_of[1 - i]) == offered.end()) {
      *why_not = "rank " + std::to_string(old_of[i]) + " does not offer its connection to rank " + std::to_string(old_of[1 - i]);
      return false;
    }
  }
  // Both ends hand over at once (each waits for the other's marker); old payload buffers are
  // freed first: nothing may read them any more.
  for (auto& v : old_out) v.clear();
  auto store = make_hash_store();
  std::thread ts[2];
  std::string errors[2];
  for (int i = 0; i < 2; ++i)
    ts[i] = std::thread([&, i] {
      transport::Device::Handover h;
      h.boot = make_bootstrap(*store, i, 2, &out->sink[i]);
      h.boot.prefix = "test/gen1";
      h.keep = {{old_of[1 - i], 1 - i}};
      try {
        out->dev[i] = ranks[static_cast<size_t>(old_of[i])]->dev->hand_over(h);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  return out->dev[0] && out->dev[1];
}

// The new group's first messages, both ways at once, at sizes that take every path (one slot,
// several, large), must arrive whole with their own tags: a byte of the old group crossing over
// would fail a receive with a mismatch or change the data.
void expect_clean_new_group(Survivors& s) {
  const std::vector<size_t> sizes = {0, 9, 40, 5000, 100000, (3 << 20) + 7};
  std::vector<Buf<uint8_t>> out[2], in[2];
  std::deque<Request> reqs[2];
  for (int i = 0; i < 2; ++i)
    for (size_t k = 0; k < sizes.size(); ++k) {
      out[i].emplace_back(sizes[k]);
      for (size_t j = 0; j < sizes[k]; ++j) out[i].back().host[j] = static_cast<uint8_t>((j * 29 + k * 5 + i) & 0xff);
      out[i].back().push();
      in[i].emplace_back(sizes[k], 0xEE);
    }
  std::thread ts[2];
  for (int i = 0; i < 2; ++i)
    ts[i] = std::thread([&, i] {
      std::vector<Request*> ptrs;
      for (size_t k = 0; k < sizes.size(); ++k) {
        reqs[i].emplace_back();
        s.dev[i]->pair(1 - i)->post_recv(in[i][k].data(), sizes[k], tag(k + 1), &reqs[i].back());
        ptrs.push_back(&reqs[i].back());
        reqs[i].emplace_back();
        s.dev[i]->pair(1 - i)->post_send(out[i][k].data(), sizes[k], tag(k + 1), &reqs[i].back());
        ptrs.push_back(&reqs[i].back());
      }
      drive(*s.dev[i], ptrs);
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < 2; ++i) {
    for (auto& q : reqs[i]) EXPECT_EQ(q.state, Request::State::done) << "new rank " << i << ": " << failure_name(q.failure) << " " << q.detail;
    for (size_t k = 0; k < sizes.size(); ++k)
      EXPECT_TRUE(in[i][k].pull() == out[1 - i][k].host) << "new rank " << i << ", message of " << sizes[k] << " bytes differs";
    EXPECT_EQ(s.sink[i].why, Failure::none) << s.sink[i].detail;
  }
}

}  // namespace

// Small messages in flight: a transport that hands over must offer the pair, and the new group
// sees none of the old bytes.
TEST_P(TransportConformance, HandOverDropsTheOldGroupsBytes) {
  if (tls_) GTEST_SKIP() << "TLS connections are not handed over (their records are not resynchronised)";
  auto ranks = connect_all(3);
  Survivors s;
  std::string why_not;
  if (!abort_with_traffic_and_hand_over(ranks, 20000, &s, &why_not)) {
    if (HasFailure()) return;
    ASSERT_TRUE(ranks[0]->dev->reusable_peers().empty() && ranks[2]->dev->reusable_peers().empty())
        << "a transport that offers some pairs must offer this quiet one: " << why_not;
    GTEST_SKIP() << GetParam() << " hands no connection over (" << why_not << "): a shrink connects anew";
  }
  expect_clean_new_group(s);
  // The pair left rank 0's old device: rank 1's connection to it is the only one it still has.
  const auto left = ranks[0]->dev->reusable_peers();
  EXPECT_TRUE(std::find(left.begin(), left.end(), 2) == left.end());
}

// A large message mid-transfer both ways: either the pair is handed over and nothing of it
// arrives in the new group, or (tcp, whose frame was cut off: the peer must learn of the abort
// from the stream's end) neither end offers it.
TEST_P(TransportConformance, HandOverAfterALargeMessageMidTransfer) {
  if (tls_) GTEST_SKIP() << "TLS connections are not handed over (their records are not resynchronised)";
  auto ranks = connect_all(3);
  Survivors s;
  std::string why_not;
  if (!abort_with_traffic_and_hand_over(ranks, (6 << 20) + 3, &s, &why_not)) {
    if (HasFailure()) return;
    GTEST_SKIP() << GetParam() << ": " << why_not << " after a message cut off: a shrink connects it anew";
  }
  expect_clean_new_group(s);
}

// A survivor that dies during the hand-over (its device goes instead of handing over): the
// other's hand-over fails within its deadline, naming it by its new rank.
TEST_P(TransportConformance, HandOverNamesAPeerThatDies) {
  if (tls_) GTEST_SKIP() << "TLS connections are not handed over (their records are not resynchronised)";
  auto ranks = connect_all(2);
  exchange_one(ranks, 0, 1);
  for (auto& r : ranks) r->dev->abort("0\nP\nshrinking");
  if (ranks[0]->dev->reusable_peers().empty()) GTEST_SKIP() << GetParam() << " hands no connection over";
  auto store = make_hash_store();
  Sink sink;
  transport::Device::Handover h;
  h.boot = make_bootstrap(*store, 0, 2, &sink, 7, 5s);
  h.boot.prefix = "test/gen1";
  h.keep = {{1, 1}};
  std::thread killer([&] {
    std::this_thread::sleep_for(50ms);
    ranks[1]->dev.reset();
  });
  const auto start = Clock::now();
  try {
    ranks[0]->dev->hand_over(h);
    ADD_FAILURE() << "the hand-over succeeded with a dead peer";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer_rank(), 1) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  } catch (const TimeoutError& e) {
    ADD_FAILURE() << "the death was not noticed, only the deadline: " << e.what();
  }
  killer.join();
  EXPECT_LT(Clock::now() - start, 3s);
}

// A rank whose part of the new group failed elsewhere (another transport's hand-over or
// connect) publishes why and sends no marker: its peer, waiting for that marker, stops at once
// with the reason instead of waiting out its deadline and blaming the silence.
TEST_P(TransportConformance, HandOverStopsWhenThePeerGaveUpElsewhere) {
  if (tls_) GTEST_SKIP() << "TLS connections are not handed over (their records are not resynchronised)";
  auto ranks = connect_all(2);
  exchange_one(ranks, 0, 1);
  for (auto& r : ranks) r->dev->abort("0\nP\nshrinking");
  if (ranks[1]->dev->reusable_peers().empty()) GTEST_SKIP() << GetParam() << " hands no connection over";
  auto store = make_hash_store();
  Sink sink0, sink1;
  transport::Bootstrap b0 = make_bootstrap(*store, 0, 2, &sink0, 7, 5s);
  b0.prefix = "test/gen1";
  transport::Device::Handover h;
  h.boot = make_bootstrap(*store, 1, 2, &sink1, 7, 5s);
  h.boot.prefix = "test/gen1";
  h.keep = {{0, 0}};
  std::thread giver_up([&] {
    std::this_thread::sleep_for(50ms);
    transport::publish_setup_failure(b0, "its other transport failed (injected)");
  });
  const auto start = Clock::now();
  try {
    ranks[1]->dev->hand_over(h);
    ADD_FAILURE() << "the hand-over succeeded without the peer's marker";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
  } catch (const TimeoutError& e) {
    ADD_FAILURE() << "waited out the deadline instead of reading the peer's reason: " << e.what();
  }
  giver_up.join();
  EXPECT_LT(Clock::now() - start, 2s);
}

// A receive of the old group still under way when its sender aborts and begins its hand-over:
// the sender's send failed, so its buffer is its user's again (here: overwritten at once). A
// receiver that reads it straight from the sender's memory (shm's cross-memory attach) must not
// take what it reads for the message: the sender's abort flag may not drop before the receiver
// has stopped reading the old group (its own hand-over record says so).
TEST_P(TransportConformance, HandOverNeverCompletesAReadOfAnAbortedSendersBuffer) {
  if (tls_) GTEST_SKIP() << "TLS connections are not handed over (their records are not resynchronised)";
  auto ranks = connect_all(2);
  exchange_one(ranks, 0, 1);
  const size_t n = (8 << 20) + 5;
  Buf<uint8_t> out(n, 0x5A), in(n, 0);
  Request s, r;
  ranks[0]->dev->pair(1)->post_send(out.data(), n, tag(9), &s);
  ranks[1]->dev->pair(0)->post_recv(in.data(), n, tag(9), &r);
  for (int k = 0; k < 3; ++k) ranks[0]->dev->poll();  // the message is described (or partly sent)
  ranks[0]->dev->abort("0\nP\nrank 0 shrinks");
  ASSERT_NE(s.state, Request::State::pending);
  std::fill(out.host.begin(), out.host.end(), uint8_t(0xC3));  // the failed send's buffer, reused
  out.push();
  const auto offered = ranks[0]->dev->reusable_peers();
  if (std::find(offered.begin(), offered.end(), 1) == offered.end())
    GTEST_SKIP() << GetParam() << " does not offer a connection whose message was cut off";
  // Rank 0 hands over (it waits for rank 1's marker until its deadline, which never comes);
  // rank 1 is still in the old group meanwhile and polls its receive to an end.
  auto store = make_hash_store();
  Sink sink;
  std::thread sender([&] {
    transport::Device::Handover h;
    h.boot = make_bootstrap(*store, 0, 2, &sink, 7, 800ms);
    h.boot.prefix = "test/gen1";
    h.keep = {{1, 1}};
    try {
      (void)ranks[0]->dev->hand_over(h);
    } catch (const std::exception&) {
      // Expected: rank 1 never hands over.
    }
  });
  std::this_thread::sleep_for(100ms);  // the hand-over has begun (its first step is immediate)
  const auto until = Clock::now() + 500ms;
  while (r.state == Request::State::pending && Clock::now() < until) {
    if (!ranks[1]->dev->poll()) std::this_thread::sleep_for(50us);
  }
  sender.join();
  if (r.state == Request::State::done) {
    EXPECT_TRUE(in.pull() == std::vector<uint8_t>(n, 0x5A))
        << "the receive completed with bytes the sender's user wrote after its send had failed";
  }
}

}  // namespace kolo::conformance

// The transport conformance suite's failures (fixture: conformance_fixture.hpp; which
// transports run it: transport_conformance_test.cpp): each is told apart and names the peer.
// A different tag or size is reported with what arrived; a dead peer (with a receive pending or
// idle), an abort notice (with its reason) and an orderly goodbye are each recognised; an abort
// fails this rank's own requests and refuses later posts; only a pair's first failure is
// reported (the engine names one culprit); a connection with the wrong secret is refused.
#include <gtest/gtest.h>

#include <atomic>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "conformance_fixture.hpp"

namespace kolo::conformance {
namespace {

// Lazily, nothing is refused until the first use: each rank sends once, which dials, and keeps
// polling until both ranks are done (a lazy device answers a connection only while polled).
std::string first_use_error(transport::Device& dev, int peer, std::atomic<int>& done) {
  int x = 1;
  Request s;
  dev.pair(peer)->post_send(&x, sizeof x, tag(1), &s);
  auto deadline = Clock::now() + 10s;
  bool mine = false;
  while (Clock::now() < deadline && done.load() < 2) {
    dev.poll();
    if (!mine && s.state != Request::State::pending) {
      mine = true;
      ++done;
    }
    std::this_thread::sleep_for(50us);
  }
  return s.state == Request::State::failed ? s.detail : "request not failed: state " + std::to_string(static_cast<int>(s.state));
}

}  // namespace

TEST_P(TransportConformance, DifferentTagIsReportedWithWhatArrived) {
  auto ranks = connect_all(2);
  Buf<int> x(1, 1), y(1, 0);
  Request s, r;
  ranks[0]->dev->pair(1)->post_send(x.data(), x.bytes(), tag(1), &s);
  drive(*ranks[0]->dev, {&s}, ranks[1]->dev.get());
  ranks[1]->dev->pair(0)->post_recv(y.data(), y.bytes(), tag(2), &r);
  drive(*ranks[1]->dev, {&r});
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::tag_mismatch);
  EXPECT_TRUE(r.got_tag == tag(1));
  EXPECT_EQ(ranks[1]->sink.why, Failure::tag_mismatch);
  EXPECT_EQ(ranks[1]->sink.peer, 0);
}

TEST_P(TransportConformance, DifferentSizeIsReported) {
  auto ranks = connect_all(2);
  Buf<int64_t> x(1, 1), y(1, 0);
  Request s, r;
  ranks[0]->dev->pair(1)->post_send(x.data(), x.bytes(), tag(1), &s);
  drive(*ranks[0]->dev, {&s}, ranks[1]->dev.get());
  ranks[1]->dev->pair(0)->post_recv(y.data(), 4, tag(1), &r);
  drive(*ranks[1]->dev, {&r});
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::size_mismatch);
  EXPECT_EQ(r.got_bytes, 8u);
}

TEST_P(TransportConformance, DeadPeerFailsPendingReceiveAndNamesIt) {
  auto ranks = connect_all(3);
  Buf<int> y(1, 0);
  Request r;
  ranks[1]->dev->pair(2)->post_recv(y.data(), y.bytes(), tag(1), &r);
  ranks[2]->dev.reset();  // closes its sockets without a goodbye, as a killed process would
  drive(*ranks[1]->dev, {&r});
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::peer_closed);
  EXPECT_EQ(ranks[1]->sink.peer, 2);
  EXPECT_NE(ranks[1]->sink.detail.find("rank 2"), std::string::npos) << ranks[1]->sink.detail;
}

TEST_P(TransportConformance, IdlePeerDeathIsNoticedToo) {
  auto ranks = connect_all(2);
  // One message first, so that a lazily connected pair exists (a lazy device notices only the
  // deaths of peers it is connected to; a dial finds the others out: TcpOnDemand.PeerDeadBeforeTheFirstConnectIsNamedAtOnce).
  Buf<int> x(1, 5), y(1, 0);
  Request s, r;
  ranks[0]->dev->pair(1)->post_send(x.data(), x.bytes(), tag(1), &s);
  ranks[1]->dev->pair(0)->post_recv(y.data(), y.bytes(), tag(1), &r);
  std::thread t([&] { drive(*ranks[0]->dev, {&s}); });
  drive(*ranks[1]->dev, {&r});
  t.join();
  ASSERT_EQ(y.pull()[0], 5);
  ranks[0]->dev.reset();
  auto deadline = Clock::now() + 5s;
  while (ranks[1]->sink.why == Failure::none && Clock::now() < deadline) {
    ranks[1]->dev->poll();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(ranks[1]->sink.why, Failure::peer_closed);
  EXPECT_EQ(ranks[1]->sink.peer, 0);
}

TEST_P(TransportConformance, AbortNoticeCarriesTheReason) {
  auto ranks = connect_all(3);
  Buf<int> y(1, 0);
  Request r;
  ranks[1]->dev->pair(0)->post_recv(y.data(), y.bytes(), tag(1), &r);
  const std::string reason = "0\nP\nrank 0 gives up: test";  // newlines: the engine's encoded form
  if (g_lazy) {
    // Lazily only connected peers hear an abort: connect rank 2 to rank 0 first (one message).
    int x = 5, z = 0;
    Request s, q;
    ranks[0]->dev->pair(2)->post_send(&x, sizeof x, tag(7), &s);
    ranks[2]->dev->pair(0)->post_recv(&z, sizeof z, tag(7), &q);
    drive(*ranks[0]->dev, {&s, &q}, ranks[2]->dev.get());
    ASSERT_EQ(z, 5);
  }
  ranks[0]->dev->abort(reason);
  // Lazily, rank 1's receive dials rank 0 after a while; rank 0 accepts it and says it aborted.
  drive(*ranks[1]->dev, {&r}, ranks[0]->dev.get());
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::peer_aborted);
  EXPECT_EQ(ranks[1]->sink.why, Failure::peer_aborted);
  EXPECT_EQ(ranks[1]->sink.peer, 0);
  EXPECT_EQ(ranks[1]->sink.detail, reason);
  // A rank with nothing pending learns it too, on its next look.
  auto deadline = Clock::now() + 5s;
  while (ranks[2]->sink.why == Failure::none && Clock::now() < deadline) {
    ranks[2]->dev->poll();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(ranks[2]->sink.why, Failure::peer_aborted);
  EXPECT_EQ(ranks[2]->sink.detail, reason);
}

// The pair contract (transports/pair_base.hpp): an abort fails this rank's own pending requests
// with `aborted`, is not reported as a peer's failure, and every later post fails at once.
TEST_P(TransportConformance, AbortFailsOwnRequestsAndRefusesLaterPosts) {
  auto ranks = connect_all(2);
  Buf<int> y(1, 0), x(1, 3);
  Request r, later_send, later_recv;
  ranks[0]->dev->pair(1)->post_recv(y.data(), y.bytes(), tag(1), &r);
  ranks[0]->dev->abort("bye");
  EXPECT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::aborted);
  EXPECT_EQ(r.detail, "bye");
  ranks[0]->dev->pair(1)->post_send(x.data(), x.bytes(), tag(2), &later_send);
  ranks[0]->dev->pair(1)->post_recv(y.data(), y.bytes(), tag(3), &later_recv);
  for (Request* q : {&later_send, &later_recv}) {
    EXPECT_EQ(q->state, Request::State::failed);
    EXPECT_EQ(q->failure, Failure::aborted);
    EXPECT_EQ(q->peer, 1);
    EXPECT_NE(q->detail.find("rank 1 already failed"), std::string::npos) << q->detail;
  }
  EXPECT_EQ(later_send.is_send, true);
  EXPECT_EQ(later_recv.tag, tag(3));
  EXPECT_EQ(ranks[0]->sink.why, Failure::none);  // its own abort is not a peer failure
  EXPECT_EQ(y.pull()[0], 0);
}

// After the first failure a pair reports nothing more: the engine names one culprit.
TEST_P(TransportConformance, OnlyTheFirstFailureIsReported) {
  auto ranks = connect_all(2);
  Buf<int> x(1, 1), y(1, 0);
  Request s, r1, r2;
  ranks[0]->dev->pair(1)->post_send(x.data(), x.bytes(), tag(1), &s);
  drive(*ranks[0]->dev, {&s}, ranks[1]->dev.get());
  ranks[1]->dev->pair(0)->post_recv(y.data(), y.bytes(), tag(2), &r1);  // mismatch: the pair fails
  ranks[1]->dev->pair(0)->post_recv(y.data(), y.bytes(), tag(1), &r2);  // pending behind it
  drive(*ranks[1]->dev, {&r1, &r2});
  EXPECT_EQ(r1.failure, Failure::tag_mismatch);
  // Failed with the pair: by its first failure if it was pending then, refused if posted after.
  EXPECT_EQ(r2.state, Request::State::failed);
  EXPECT_TRUE(r2.failure == Failure::tag_mismatch || r2.failure == Failure::aborted) << failure_name(r2.failure);
  ranks[0]->dev.reset();                         // the peer dies too: not reported again
  for (int i = 0; i < 50; ++i) ranks[1]->dev->poll();
  EXPECT_EQ(ranks[1]->sink.why, Failure::tag_mismatch);
  EXPECT_EQ(ranks[1]->sink.reports, 1);
}

TEST_P(TransportConformance, OrderlyCloseReportsNoFailure) {
  auto ranks = connect_all(3);
  // A message in flight that is received before the close: the goodbye must not overtake it.
  Buf<uint8_t> data(50000), got(50000, 0);
  for (size_t i = 0; i < data.size(); ++i) data.host[i] = static_cast<uint8_t>(i * 7 + 1);
  data.push();
  Request s, r;
  ranks[0]->dev->pair(2)->post_send(data.data(), data.size(), tag(8), &s);
  ranks[2]->dev->pair(0)->post_recv(got.data(), got.size(), tag(8), &r);
  std::vector<std::thread> ts;
  std::vector<std::vector<int>> missing(3);
  for (int k = 0; k < 3; ++k)
    ts.emplace_back([&, k] {
      if (k == 0) drive(*ranks[0]->dev, {&s});
      if (k == 2) drive(*ranks[2]->dev, {&r});
      missing[static_cast<size_t>(k)] = ranks[static_cast<size_t>(k)]->dev->close(Clock::now() + 5s);
    });
  for (auto& t : ts) t.join();
  EXPECT_TRUE(got.pull() == data.host);
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(missing[static_cast<size_t>(k)].empty()) << "rank " << k;
    EXPECT_EQ(ranks[static_cast<size_t>(k)]->sink.why, Failure::none) << ranks[static_cast<size_t>(k)]->sink.detail;
  }
  // A peer that leaves after its goodbye is not a failure either.
  ranks[0]->dev.reset();
  for (int i = 0; i < 50; ++i) ranks[1]->dev->poll();
  EXPECT_EQ(ranks[1]->sink.why, Failure::none) << ranks[1]->sink.detail;
}

TEST_P(TransportConformance, WrongSecretIsRefused) {
  auto store = make_hash_store();
  Sink s0, s1;
  std::string err0, err1;
  std::unique_ptr<transport::Device> d0, d1;  // kept until both threads are done with them
  std::atomic<int> done{0};
  std::thread t0([&] {
    try {
      d0 = g_transport->connect(make_bootstrap(*store, 0, 2, &s0, 1, 3s), {1});
      if (g_lazy) err0 = first_use_error(*d0, 1, done);
    } catch (const std::exception& e) {
      err0 = e.what();
    }
  });
  std::thread t1([&] {
    try {
      d1 = g_transport->connect(make_bootstrap(*store, 1, 2, &s1, 2, 3s), {0});
      if (g_lazy) err1 = first_use_error(*d1, 0, done);
    } catch (const std::exception& e) {
      err1 = e.what();
    }
  });
  t0.join();
  t1.join();
  EXPECT_NE(err0.find("refused"), std::string::npos) << err0;
  EXPECT_NE(err0.find("secret"), std::string::npos) << err0;
  EXPECT_NE(err1.find("secret"), std::string::npos) << err1;  // the acceptor says why it waited in vain
}

}  // namespace kolo::conformance

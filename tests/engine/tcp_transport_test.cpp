// Proves the TCP transport on its own, with threads as ranks sharing an in-process store:
// bytes arrive intact at every size, messages match in order and a different tag or size is
// reported, a dead peer, an abort notice and an orderly goodbye are each told apart, and a
// connection with the wrong secret is refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "transports/tcp/tcp_device.hpp"
#include "transports/transport.hpp"

using namespace kolo;
using namespace std::chrono_literals;
using transport::Failure;
using transport::Request;
using transport::Tag;
using Clock = std::chrono::steady_clock;

namespace {

struct Sink : transport::FailureSink {
  std::mutex mu;
  int peer = -1;
  Failure why = Failure::none;
  std::string detail;
  void peer_failed(int p, Failure w, const std::string& d) override {
    std::lock_guard<std::mutex> lk(mu);
    if (why != Failure::none) return;
    peer = p;
    why = w;
    detail = d;
  }
};

struct Rank {
  Sink sink;
  std::unique_ptr<transport::Device> dev;
};

transport::Bootstrap make_bootstrap(Store& store, int rank, int size, Sink* sink, uint8_t secret_byte = 7,
                                    std::chrono::milliseconds timeout = 10s) {
  transport::Bootstrap b;
  b.store = &store;
  b.prefix = "test";
  b.rank = rank;
  b.size = size;
  b.secret.fill(secret_byte);
  b.deadline = Clock::now() + timeout;
  b.listen_addr = "127.0.0.1";
  b.failures = sink;
  return b;
}

// Connects `size` ranks in threads; returns them connected.
std::vector<std::unique_ptr<Rank>> connect_all(int size) {
  auto store = make_hash_store();
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<Rank>());
  std::vector<std::thread> ts;
  for (int r = 0; r < size; ++r)
    ts.emplace_back([&, r] {
      std::vector<int> peers;
      for (int p = 0; p < size; ++p)
        if (p != r) peers.push_back(p);
      ranks[static_cast<size_t>(r)]->dev = tcp::TcpDevice::connect(make_bootstrap(*store, r, size, &ranks[static_cast<size_t>(r)]->sink), peers);
    });
  for (auto& t : ts) t.join();
  return ranks;
}

// Drives `dev` until every request is no longer pending, or fails the test after 10 s.
void drive(transport::Device& dev, std::vector<Request*> reqs) {
  auto deadline = Clock::now() + 10s;
  for (;;) {
    bool pending = false;
    for (auto* r : reqs) pending |= r->state == Request::State::pending;
    if (!pending) return;
    ASSERT_LT(Clock::now(), deadline) << "requests did not complete";
    if (!dev.poll()) std::this_thread::sleep_for(50us);
  }
}

Tag tag(uint64_t a) {
  Tag t;
  t.w[0] = a;
  t.w[1] = a * 3;
  t.w[2] = ~a;
  return t;
}

}  // namespace

TEST(TcpTransport, BytesArriveIntactAtEverySize) {
  auto ranks = connect_all(2);
  const std::vector<size_t> sizes = {0, 1, 7, 40, 4096, 16 * 1024 - 1, 65536 + 3, 1 << 20, (8 << 20) + 5};
  std::vector<std::vector<uint8_t>> out(sizes.size()), in(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].resize(sizes[i]);
    for (size_t j = 0; j < sizes[i]; ++j) out[i][j] = static_cast<uint8_t>((j * 131 + i * 7) & 0xff);
    in[i].assign(sizes[i], 0xEE);
  }
  std::thread sender([&] {
    std::vector<Request> reqs(sizes.size());
    std::vector<Request*> ptrs;
    for (size_t i = 0; i < sizes.size(); ++i) {
      ranks[0]->dev->pair(1)->post_send(out[i].data(), sizes[i], tag(i), &reqs[i]);
      ptrs.push_back(&reqs[i]);
    }
    drive(*ranks[0]->dev, ptrs);
    for (auto& r : reqs) EXPECT_EQ(r.state, Request::State::done);
  });
  std::vector<Request> reqs(sizes.size());
  std::vector<Request*> ptrs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ranks[1]->dev->pair(0)->post_recv(in[i].data(), sizes[i], tag(i), &reqs[i]);
    ptrs.push_back(&reqs[i]);
  }
  drive(*ranks[1]->dev, ptrs);
  sender.join();
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(reqs[i].state, Request::State::done) << "size " << sizes[i];
    EXPECT_TRUE(in[i] == out[i]) << "payload of size " << sizes[i] << " differs";
  }
}

TEST(TcpTransport, ReceivePostedAfterArrivalStillMatches) {
  auto ranks = connect_all(2);
  std::vector<int> data(1000);
  std::iota(data.begin(), data.end(), 5);
  Request s;
  ranks[0]->dev->pair(1)->post_send(data.data(), data.size() * sizeof(int), tag(9), &s);
  drive(*ranks[0]->dev, {&s});
  std::this_thread::sleep_for(20ms);
  ranks[1]->dev->poll();  // reads the header and parks it: no receive yet
  std::vector<int> got(1000, -1);
  Request r;
  ranks[1]->dev->pair(0)->post_recv(got.data(), got.size() * sizeof(int), tag(9), &r);
  drive(*ranks[1]->dev, {&r});
  EXPECT_EQ(r.state, Request::State::done);
  EXPECT_EQ(got, data);
}

TEST(TcpTransport, DifferentTagIsReportedWithWhatArrived) {
  auto ranks = connect_all(2);
  int x = 1, y = 0;
  Request s, r;
  ranks[0]->dev->pair(1)->post_send(&x, sizeof x, tag(1), &s);
  drive(*ranks[0]->dev, {&s});
  ranks[1]->dev->pair(0)->post_recv(&y, sizeof y, tag(2), &r);
  drive(*ranks[1]->dev, {&r});
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::tag_mismatch);
  EXPECT_TRUE(r.got_tag == tag(1));
  EXPECT_EQ(ranks[1]->sink.why, Failure::tag_mismatch);
  EXPECT_EQ(ranks[1]->sink.peer, 0);
}

TEST(TcpTransport, DifferentSizeIsReported) {
  auto ranks = connect_all(2);
  int64_t x = 1, y = 0;
  Request s, r;
  ranks[0]->dev->pair(1)->post_send(&x, sizeof x, tag(1), &s);
  drive(*ranks[0]->dev, {&s});
  ranks[1]->dev->pair(0)->post_recv(&y, 4, tag(1), &r);
  drive(*ranks[1]->dev, {&r});
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::size_mismatch);
  EXPECT_EQ(r.got_bytes, 8u);
}

TEST(TcpTransport, DeadPeerFailsPendingReceiveAndNamesIt) {
  auto ranks = connect_all(3);
  int y = 0;
  Request r;
  ranks[1]->dev->pair(2)->post_recv(&y, sizeof y, tag(1), &r);
  ranks[2]->dev.reset();  // closes its sockets without a goodbye, as a killed process would
  drive(*ranks[1]->dev, {&r});
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::peer_closed);
  EXPECT_EQ(ranks[1]->sink.peer, 2);
  EXPECT_NE(ranks[1]->sink.detail.find("rank 2"), std::string::npos) << ranks[1]->sink.detail;
}

TEST(TcpTransport, IdlePeerDeathIsNoticedToo) {
  auto ranks = connect_all(2);
  ranks[0]->dev.reset();
  auto deadline = Clock::now() + 5s;
  while (ranks[1]->sink.why == Failure::none && Clock::now() < deadline) {
    ranks[1]->dev->poll();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(ranks[1]->sink.why, Failure::peer_closed);
  EXPECT_EQ(ranks[1]->sink.peer, 0);
}

TEST(TcpTransport, AbortNoticeCarriesTheReason) {
  auto ranks = connect_all(2);
  int y = 0;
  Request r;
  ranks[1]->dev->pair(0)->post_recv(&y, sizeof y, tag(1), &r);
  ranks[0]->dev->abort("rank 0 gives up: test");
  drive(*ranks[1]->dev, {&r});
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(ranks[1]->sink.why, Failure::peer_aborted);
  EXPECT_EQ(ranks[1]->sink.detail, "rank 0 gives up: test");
}

TEST(TcpTransport, OrderlyCloseReportsNoFailure) {
  auto ranks = connect_all(3);
  std::vector<std::thread> ts;
  std::vector<std::vector<int>> missing(3);
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] { missing[static_cast<size_t>(r)] = ranks[static_cast<size_t>(r)]->dev->close(Clock::now() + 5s); });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(missing[static_cast<size_t>(r)].empty()) << "rank " << r;
    EXPECT_EQ(ranks[static_cast<size_t>(r)]->sink.why, Failure::none) << ranks[static_cast<size_t>(r)]->sink.detail;
  }
}

TEST(TcpTransport, WrongSecretIsRefused) {
  auto store = make_hash_store();
  Sink s0, s1;
  std::string err0, err1;
  std::thread t0([&] {
    try {
      tcp::TcpDevice::connect(make_bootstrap(*store, 0, 2, &s0, 1, 3s), {1});
    } catch (const std::exception& e) {
      err0 = e.what();
    }
  });
  std::thread t1([&] {
    try {
      tcp::TcpDevice::connect(make_bootstrap(*store, 1, 2, &s1, 2, 3s), {0});
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

// The transport conformance suite's data path (fixture: conformance_fixture.hpp; which
// transports run it: transport_conformance_test.cpp): bytes arrive intact at every size (sizes
// that cross each transport's slot, read-ahead and large-message thresholds), a receive posted
// after its message arrived still matches, messages match in posting order whichever side posts
// first, and four ranks exchanging at once keep every pair's order.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <numeric>
#include <thread>
#include <vector>

#include "conformance_fixture.hpp"

namespace kolo::conformance {

TEST_P(TransportConformance, BytesArriveIntactAtEverySize) {
  auto ranks = connect_all(2);
  const std::vector<size_t> sizes = {0, 1, 7, 40, 4096, 16 * 1024 - 1, 65536 + 3, 1 << 20, (8 << 20) + 5};
  std::vector<Buf<uint8_t>> out, in;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.emplace_back(sizes[i]);
    for (size_t j = 0; j < sizes[i]; ++j) out[i].host[j] = static_cast<uint8_t>((j * 131 + i * 7) & 0xff);
    out[i].push();
    in.emplace_back(sizes[i], 0xEE);
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
    EXPECT_TRUE(in[i].pull() == out[i].host) << "payload of size " << sizes[i] << " differs";
  }
}

TEST_P(TransportConformance, ReceivePostedAfterArrivalStillMatches) {
  auto ranks = connect_all(2);
  Buf<int> data(1000);
  std::iota(data.host.begin(), data.host.end(), 5);
  data.push();
  Request s;
  ranks[0]->dev->pair(1)->post_send(data.data(), data.bytes(), tag(9), &s);
  drive(*ranks[0]->dev, {&s}, ranks[1]->dev.get());
  std::this_thread::sleep_for(20ms);
  ranks[1]->dev->poll();  // reads the header and parks it: no receive yet
  Buf<int> got(1000, -1);
  Request r;
  ranks[1]->dev->pair(0)->post_recv(got.data(), got.bytes(), tag(9), &r);
  drive(*ranks[1]->dev, {&r});
  EXPECT_EQ(r.state, Request::State::done);
  EXPECT_EQ(got.pull(), data.host);
}

TEST_P(TransportConformance, ManyMessagesMatchInPostingOrderWhicheverSidePostsFirst) {
  auto ranks = connect_all(2);
  constexpr int kMessages = 200;
  std::vector<Buf<uint32_t>> out, in;
  for (int i = 0; i < kMessages; ++i) {
    out.emplace_back(static_cast<size_t>(1 + (i * 37) % 3000), static_cast<uint32_t>(i * 2654435761u));
    in.emplace_back(out[i].size(), 0);
  }
  std::vector<Request> sends(kMessages), recvs(kMessages);
  std::vector<Request*> sp, rp;
  // Half the receives are posted before any message is sent, half after they have arrived.
  for (int i = 0; i < kMessages / 2; ++i) {
    ranks[1]->dev->pair(0)->post_recv(in[i].data(), in[i].size() * 4, tag(static_cast<uint64_t>(i)), &recvs[i]);
    rp.push_back(&recvs[i]);
  }
  for (int i = 0; i < kMessages; ++i) {
    ranks[0]->dev->pair(1)->post_send(out[i].data(), out[i].size() * 4, tag(static_cast<uint64_t>(i)), &sends[i]);
    sp.push_back(&sends[i]);
  }
  std::thread sender([&] { drive(*ranks[0]->dev, sp); });
  drive(*ranks[1]->dev, rp);
  for (int i = kMessages / 2; i < kMessages; ++i) {
    ranks[1]->dev->pair(0)->post_recv(in[i].data(), in[i].size() * 4, tag(static_cast<uint64_t>(i)), &recvs[i]);
    rp.push_back(&recvs[i]);
  }
  drive(*ranks[1]->dev, rp);
  sender.join();
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(recvs[i].state, Request::State::done) << "message " << i;
    ASSERT_EQ(sends[i].state, Request::State::done) << "message " << i;
    ASSERT_EQ(in[i].pull(), out[i].host) << "message " << i;
  }
}

TEST_P(TransportConformance, FourRanksExchangingAtOnceKeepEveryPairsOrder) {
  constexpr int kRanks = 4, kRounds = 20;
  auto ranks = connect_all(kRanks);
  auto value = [](int from, int to, int round, size_t j) {
    return static_cast<uint16_t>(from * 1000 + to * 100 + round * 7 + static_cast<int>(j));
  };
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int r = 0; r < kRanks; ++r) {
    ts.emplace_back([&, r] {
      std::deque<Buf<uint16_t>> out, in;
      std::deque<Request> reqs;
      std::vector<Request*> ptrs;
      for (int round = 0; round < kRounds; ++round)
        for (int p = 0; p < kRanks; ++p) {
          if (p == r) continue;
          const size_t n = static_cast<size_t>(1 + (round * 997 + p * 31) % 20000);
          out.emplace_back(n);
          for (size_t j = 0; j < n; ++j) out.back().host[j] = value(r, p, round, j);
          out.back().push();
          reqs.emplace_back();
          ranks[r]->dev->pair(p)->post_send(out.back().data(), n * 2, tag(static_cast<uint64_t>(round)), &reqs.back());
          ptrs.push_back(&reqs.back());
          const size_t m = static_cast<size_t>(1 + (round * 997 + r * 31) % 20000);
          in.emplace_back(m, 0);
          reqs.emplace_back();
          ranks[r]->dev->pair(p)->post_recv(in.back().data(), m * 2, tag(static_cast<uint64_t>(round)), &reqs.back());
          ptrs.push_back(&reqs.back());
        }
      drive(*ranks[r]->dev, ptrs);
      for (auto* q : ptrs)
        if (q->state != Request::State::done) {
          ADD_FAILURE() << "rank " << r << ": a request to or from rank " << q->peer << " failed: " << q->detail;
          break;
        }
      size_t k = 0;
      for (int round = 0; round < kRounds; ++round)
        for (int p = 0; p < kRanks; ++p) {
          if (p == r) continue;
          const auto& got = in[k++].pull();
          for (size_t j = 0; j < got.size(); ++j)
            if (got[j] != value(p, r, round, j)) {
              if (bad++ == 0) ADD_FAILURE() << "rank " << r << " from " << p << " round " << round << " element " << j << " of " << got.size() << ": " << got[j] << " not " << value(p, r, round, j);
              break;
            }
        }
      for (auto* q : ptrs)
        if (q->state != Request::State::done) ++bad;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace kolo::conformance

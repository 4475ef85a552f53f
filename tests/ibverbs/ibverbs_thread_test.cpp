// The ibverbs transport with threads as ranks, over whatever RDMA port this host has (Soft-RoCE
// in scripts/rdma-vm.sh's VM): bytes intact at every size around the slot boundaries and through
// many ring wraps, a tag mismatch reported with what arrived, abort notices, orderly close.
// Without a usable port those tests skip, and one checks instead that forcing the transport
// says why it cannot be used.
#include <gtest/gtest.h>

#include <thread>

#include "../shm/shm_test_support.hpp"
#include "kolo/error.hpp"
#include "transports/ibverbs/ib_device.hpp"
#include "transports/ibverbs/ib_port.hpp"
#include "transports/ibverbs/ib_wire.hpp"

using namespace kolo;
using namespace kolo::shmtest;

namespace {

bool have_port() { return ib::port_problem().empty(); }

#define REQUIRE_RDMA_PORT() \
  if (!have_port()) GTEST_SKIP() << "no usable RDMA port here: " << ib::port_problem()

std::vector<std::unique_ptr<Rank>> connect_ib(int size, const std::string& prefix) {
  auto store = make_hash_store();
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<Rank>());
  std::vector<std::thread> ts;
  std::mutex mu;
  std::string error;
  for (int r = 0; r < size; ++r)
    ts.emplace_back([&, r] {
      std::vector<int> peers;
      for (int p = 0; p < size; ++p)
        if (p != r) peers.push_back(p);
      try {
        Rank& me = *ranks[static_cast<size_t>(r)];
        me.dev = ib::IbDevice::connect(make_bootstrap(*store, r, size, &me.sink, 7, 30s, prefix), peers);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(mu);
        error += "rank " + std::to_string(r) + ": " + e.what() + "\n";
      }
    });
  for (auto& t : ts) t.join();
  if (!error.empty()) throw std::runtime_error("connect failed:\n" + error);
  return ranks;
}

size_t slot_payload() { return table_default("KOLO_IB_SLOT_BYTES") - ib::kSlotHeaderBytes; }

TEST(IbverbsThreads, BytesArriveIntactAtEverySize) {
  REQUIRE_RDMA_PORT();
  const size_t p = slot_payload();
  const size_t slots = table_default("KOLO_IB_SLOTS");
  // Empty, tiny, one slot's payload +-1, several slots, and more than a whole ring (wraps).
  const std::vector<size_t> sizes = {0, 1, 63, 64, 4096, p - 1, p, p + 1, 3 * p + 5, slots * p + 7, 4 * slots * p + 3};
  auto ranks = connect_ib(2, "ibtest-sizes");
  std::vector<std::string> errors(2);
  auto run = [&](int me) {
    const int other = 1 - me;
    auto& dev = *ranks[static_cast<size_t>(me)]->dev;
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<Request> sreq(sizes.size()), rreq(sizes.size());
    std::vector<Request*> all;
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(pattern(sizes[i], static_cast<uint64_t>(me * 1000 + i)));
      in.emplace_back(sizes[i], 0xEE);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      dev.pair(other)->post_recv(in[i].data(), sizes[i], tag(100 + i), &rreq[i]);
      dev.pair(other)->post_send(out[i].data(), sizes[i], tag(100 + i), &sreq[i]);
      all.push_back(&rreq[i]);
      all.push_back(&sreq[i]);
    }
    if (!drive(dev, all, 120s).finished) errors[static_cast<size_t>(me)] += "requests did not complete; ";
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sreq[i].state != Request::State::done || rreq[i].state != Request::State::done)
        errors[static_cast<size_t>(me)] += "size " + std::to_string(sizes[i]) + " not done (" + rreq[i].detail + sreq[i].detail + "); ";
      else if (in[i] != pattern(sizes[i], static_cast<uint64_t>(other * 1000 + i)))
        errors[static_cast<size_t>(me)] += "payload of size " + std::to_string(sizes[i]) + " differs; ";
    }
    if (!dev.close(Clock::now() + 20s).empty()) errors[static_cast<size_t>(me)] += "no goodbye from the peer; ";
  };
  std::thread t([&] { run(1); });
  run(0);
  t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(ranks[0]->sink.first(), Failure::none) << ranks[0]->sink.detail;
  EXPECT_EQ(ranks[1]->sink.first(), Failure::none) << ranks[1]->sink.detail;
}

TEST(IbverbsThreads, TagMismatchFailsTheReceiveWithWhatArrived) {
  REQUIRE_RDMA_PORT();
  auto ranks = connect_ib(2, "ibtest-mismatch");
  std::vector<uint8_t> out = pattern(100, 1), in(100);
  Request s, r;
  std::thread t([&] {
    ranks[0]->dev->pair(1)->post_send(out.data(), out.size(), tag(5), &s);
    drive(*ranks[0]->dev, {&s}, 30s);
  });
  ranks[1]->dev->pair(0)->post_recv(in.data(), in.size(), tag(6), &r);
  drive(*ranks[1]->dev, {&r}, 30s);
  t.join();
  EXPECT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::tag_mismatch);
  EXPECT_TRUE(r.got_tag == tag(5));
  EXPECT_EQ(r.got_bytes, 100u);
  EXPECT_EQ(ranks[1]->sink.first(), Failure::tag_mismatch);
  EXPECT_EQ(ranks[1]->sink.peer, 0);
}

TEST(IbverbsThreads, AbortNoticeFailsThePeersPendingReceive) {
  REQUIRE_RDMA_PORT();
  auto ranks = connect_ib(2, "ibtest-abort");
  std::vector<uint8_t> in(10);
  Request r;
  ranks[1]->dev->pair(0)->post_recv(in.data(), in.size(), tag(1), &r);
  ranks[0]->dev->abort("rank 0 gives up: test reason");
  drive(*ranks[1]->dev, {&r}, 30s);
  EXPECT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::peer_aborted);
  EXPECT_NE(r.detail.find("test reason"), std::string::npos) << r.detail;
  EXPECT_EQ(ranks[1]->sink.first(), Failure::peer_aborted);
}

TEST(IbverbsThreads, FourRanksExchangeWithEveryPeer) {
  REQUIRE_RDMA_PORT();
  constexpr int kRanks = 4;
  const size_t bytes = 3 * slot_payload() + 11;
  auto ranks = connect_ib(kRanks, "ibtest-four");
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> ts;
  for (int me = 0; me < kRanks; ++me)
    ts.emplace_back([&, me] {
      auto& dev = *ranks[static_cast<size_t>(me)]->dev;
      std::vector<std::vector<uint8_t>> out, in;
      std::vector<Request> sreq(kRanks), rreq(kRanks);
      std::vector<Request*> all;
      for (int p = 0; p < kRanks; ++p) {
        out.push_back(pattern(bytes, static_cast<uint64_t>(me * 10 + p)));
        in.emplace_back(bytes, 0);
      }
      for (int p = 0; p < kRanks; ++p) {
        if (p == me) continue;
        dev.pair(p)->post_recv(in[static_cast<size_t>(p)].data(), bytes, tag(9), &rreq[static_cast<size_t>(p)]);
        dev.pair(p)->post_send(out[static_cast<size_t>(p)].data(), bytes, tag(9), &sreq[static_cast<size_t>(p)]);
        all.push_back(&rreq[static_cast<size_t>(p)]);
        all.push_back(&sreq[static_cast<size_t>(p)]);
      }
      drive(dev, all, 120s);
      for (int p = 0; p < kRanks; ++p)
        if (p != me && (rreq[static_cast<size_t>(p)].state != Request::State::done ||
                        in[static_cast<size_t>(p)] != pattern(bytes, static_cast<uint64_t>(p * 10 + me))))
          errors[static_cast<size_t>(me)] += "from rank " + std::to_string(p) + " wrong or missing; ";
      if (!dev.close(Clock::now() + 20s).empty()) errors[static_cast<size_t>(me)] += "missing goodbyes; ";
    });
  for (auto& t : ts) t.join();
  for (int me = 0; me < kRanks; ++me) EXPECT_EQ(errors[static_cast<size_t>(me)], "") << "rank " << me;
}

TEST(IbverbsSelection, ForcingItWithoutAPortSaysWhy) {
  if (have_port()) GTEST_SKIP() << "this host has a usable RDMA port";
  ScopedEnv forced("KOLO_TRANSPORT", "ibverbs");
  auto store = make_hash_store();
  Sink sink;
  const transport::TransportInfo* t = transport::find_transport("ibverbs");
  ASSERT_NE(t, nullptr);
  try {
    t->reaches(make_bootstrap(*store, 0, 2, &sink, 7, 5s, "ibtest-forced"), 1);
    FAIL() << "reaches() accepted a host without a usable RDMA port";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("KOLO_TRANSPORT=ibverbs"), std::string::npos) << what;
    EXPECT_NE(what.find("RDMA"), std::string::npos) << what;
  }
}

// Ranks on two hosts: each end publishes whether it has a port before choosing, so both agree.
TEST(IbverbsSelection, PeersOnOtherHostsAgreeWhetherToUseIt) {
  ScopedEnv automatic("KOLO_TRANSPORT", "");
  auto store = make_hash_store();
  Sink sinks[2];
  bool reached[2] = {false, false};
  auto run = [&](int me) {
    transport::Bootstrap b = make_bootstrap(*store, me, 2, &sinks[me], 7, 10s, "ibtest-hosts");
    b.host_ids = {"host-a", "host-b"};
    reached[me] = ib::IbDevice::reaches(b, 1 - me);
  };
  std::thread t([&] { run(1); });
  run(0);
  t.join();
  EXPECT_EQ(reached[0], have_port());
  EXPECT_EQ(reached[1], have_port());
  EXPECT_EQ(store->get_string("ibtest-hosts/ib/usable/0"), have_port() ? "1" : "0");
}

TEST(IbverbsSelection, ListedBetweenTcpAndShm) {
  const transport::TransportInfo* ib = transport::find_transport("ibverbs");
  const transport::TransportInfo* tcp = transport::find_transport("tcp");
  const transport::TransportInfo* shm = transport::find_transport("shm");
  ASSERT_TRUE(ib && tcp && shm);
  EXPECT_GT(ib->priority, tcp->priority);
  EXPECT_LT(ib->priority, shm->priority);
}

}  // namespace

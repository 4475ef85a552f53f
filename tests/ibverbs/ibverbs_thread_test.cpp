// The ibverbs transport with threads as ranks, over whatever RDMA port this host has (Soft-RoCE
// in scripts/env/rdma-vm.sh's VM): bytes intact at every size around the slot boundaries and through
// many ring wraps, then orderly close. What every transport must do (matching, mismatches, dead
// peers, aborts, four ranks at once) is the conformance suite's (tests/transports), which the VM
// runs for ibverbs too.
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
  return connect_threads(size, [size, prefix](Store& store, Rank& me, int r, const std::vector<int>& peers) {
    return ib::IbDevice::connect(make_bootstrap(store, r, size, &me.sink, 7, 30s, prefix), peers);
  });
}

size_t slot_payload() { return table_default("KOLO_IB_SLOT_BYTES") - ib::kSlotHeaderBytes; }

TEST(IbverbsThreads, BytesArriveIntactAtEverySize) {
  REQUIRE_RDMA_PORT();
  const size_t p = slot_payload();
  const size_t slots = table_default("KOLO_IB_SLOTS");
  // Empty, tiny, one slot's payload +-1, several slots, and more than a whole ring (wraps).
  const std::vector<size_t> sizes = {0, 1, 63, 64, 4096, p - 1, p, p + 1, 3 * p + 5, slots * p + 7, 4 * slots * p + 3};
  auto ranks = connect_ib(2, "ibtest-sizes");
  const std::vector<std::string> errors = exchange_every_size(ranks, sizes, 120s, [](transport::Device& dev) {
    return dev.close(Clock::now() + 20s).empty() ? std::string() : std::string("no goodbye from the peer; ");
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(ranks[0]->sink.first(), Failure::none) << ranks[0]->sink.detail;
  EXPECT_EQ(ranks[1]->sink.first(), Failure::none) << ranks[1]->sink.detail;
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

// ProcessGroup::grow and ::join with real processes (scenario_grow.cpp): the store lives in this
// driver, as kolorun hosts it. 2 members grow to 3 (tcp) after three checks that found nobody
// waiting; 4 ranks lose one (SIGKILL), shrink to 3 and grow back to 4 (shm); a joiner nobody
// admits times out and is not admitted by a later grow; a joiner that comes after the group was
// shut down is refused at once. The grown groups check collectives element by element, the
// joiner's rank included (a broadcast from it). Every launch is bounded (ProcessWorld's deadline).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "driver_support.hpp"
#include "kolo/store.hpp"

namespace kolo::coltest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct DriverStore {
  std::unique_ptr<TCPStoreServer> server = TCPStoreServer::start("127.0.0.1", 0);
  std::string addr() const { return "127.0.0.1:" + std::to_string(server->port()); }
};

LaunchSpec launch(const DriverStore& store, int ranks, const std::vector<std::string>& args, const std::string& transport) {
  LaunchSpec spec = worker_launch("grow", ranks, seconds(60), "10");
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.env["KOLO_TRANSPORT"] = transport;
  spec.env["KOLO_STORE_ADDR"] = store.addr();
  return spec;
}

LaunchSpec joiner(const DriverStore& store, const std::vector<std::string>& args, const std::string& transport) {
  LaunchSpec spec = launch(store, 1, args, transport);
  spec.env["KOLO_JOIN"] = "1";
  return spec;
}

void wait_ready(ProcessWorld& world, const std::vector<int>& ranks) {
  for (int r : ranks)
    ASSERT_TRUE(world.wait_for_stdout(r, "ready to grow", seconds(30))) << "rank " << r << " never got ready";
}

TEST(Grow, TwoMembersAdmitOneJoinerTcp) {
  DriverStore store;
  ProcessWorld members(launch(store, 2, {"member"}, "tcp"));
  wait_ready(members, {0, 1});
  ProcessWorld join(joiner(store, {"joiner", "2", "3", "1"}, "tcp"));
  const WorldOutcome m = members.wait();
  const WorldOutcome j = join.wait();
  EXPECT_FALSE(m.deadline_hit || j.deadline_hit) << m.describe() << j.describe();
  for (const RankOutcome& r : m.ranks) {
    EXPECT_TRUE(r.succeeded()) << r.describe();
    EXPECT_TRUE(contains(r.out, "nobody waiting: nullptr")) << r.describe();
    EXPECT_TRUE(contains(r.out, "grown: generation 1 rank " + std::to_string(r.rank) + " of 3")) << r.describe();
  }
  EXPECT_TRUE(j.ranks[0].succeeded() && contains(j.ranks[0].out, "grown: generation 1 rank 2 of 3")) << j.describe();
}

TEST(Grow, ShrunkGroupGrowsBackShm) {
  DriverStore store;
  ProcessWorld members(launch(store, 4, {"shrink-grow", "3"}, "shm"));
  wait_ready(members, {0, 1, 2});
  ProcessWorld join(joiner(store, {"joiner", "3", "4", "2"}, "shm"));
  const WorldOutcome m = members.wait();
  const WorldOutcome j = join.wait();
  EXPECT_FALSE(m.deadline_hit || j.deadline_hit) << m.describe() << j.describe();
  EXPECT_TRUE(!m.ranks[3].exited && m.ranks[3].signal == SIGKILL) << m.ranks[3].describe();
  for (int r = 0; r < 3; ++r) {
    const RankOutcome& o = m.ranks[r];
    EXPECT_TRUE(o.succeeded()) << o.describe();
    EXPECT_TRUE(contains(o.out, "shrunk: generation 1 rank " + std::to_string(r) + " of 3")) << o.describe();
    EXPECT_TRUE(contains(o.out, "grown: generation 2 rank " + std::to_string(r) + " of 4")) << o.describe();
  }
  EXPECT_TRUE(j.ranks[0].succeeded() && contains(j.ranks[0].out, "grown: generation 2 rank 3 of 4")) << j.describe();
}

// A joiner that gave up (0.5 s, nobody growing) withdrew: the next grow must not admit it. Once
// that group is shut down, a new joiner is refused at once rather than waiting its 30 s.
TEST(Grow, TimedOutJoinerIsNotAdmittedAndALateOneIsRefused) {
  DriverStore store;
  LaunchSpec early = joiner(store, {"late"}, "tcp");
  early.env["KOLO_GROW_JOIN_MS"] = "500";
  ProcessWorld first(early);
  const WorldOutcome f = first.wait();
  EXPECT_TRUE(f.ranks[0].succeeded() && contains(f.ranks[0].out, "join timed out (TimeoutError): ") &&
              contains(f.ranks[0].out, "no member admitted this process"))
      << f.describe();
  EXPECT_GE(f.ranks[0].seconds, 0.5) << f.describe();

  ProcessWorld members(launch(store, 2, {"idle"}, "tcp"));
  const WorldOutcome m = members.wait();
  for (const RankOutcome& r : m.ranks)
    EXPECT_TRUE(r.succeeded() && contains(r.out, "nobody waiting: nullptr")) << r.describe();

  ProcessWorld late(joiner(store, {"late"}, "tcp"));
  const WorldOutcome l = late.wait();
  EXPECT_TRUE(l.ranks[0].succeeded() && contains(l.ranks[0].out, "join refused (ExcludedError, generation 0): ") &&
              contains(l.ranks[0].out, "the group ended"))
      << l.describe();
  EXPECT_LT(l.ranks[0].seconds, 10.0) << l.describe();
}

// What the trainer's check at every step boundary costs with nobody waiting, against the
// broadcast it contains (printed: docs/RELIABILITY.md quotes it); every call must give nullptr.
TEST(Grow, CostOfACheckWithNobodyWaiting) {
  for (const char* transport : {"shm", "tcp"}) {
    DriverStore store;  // one job per store: the same group names
    ProcessWorld world(launch(store, 4, {"cost", "300"}, transport));
    const WorldOutcome o = world.wait();
    EXPECT_TRUE(o.all_succeeded()) << o.describe();
    for (int r : {0, 3}) {  // the decider, and a member waiting for its answer
      const size_t at = o.ranks[size_t(r)].out.find("cost on rank");
      ASSERT_NE(at, std::string::npos) << o.describe();
      const std::string& out = o.ranks[size_t(r)].out;
      std::printf("4 ranks, %s: %s\n", transport, out.substr(at, out.find('\n', at) - at).c_str());
    }
  }
}

}  // namespace
}  // namespace kolo::coltest

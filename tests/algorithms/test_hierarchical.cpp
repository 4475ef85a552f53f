// The hierarchical algorithms ("hier") on host layouts the default harness layout (pairs of
// ranks) does not give: several ranks per host, uneven hosts, hosts whose ranks are not
// consecutive, one rank per host, one host. Every element is checked against values computed
// from the formula (values.hpp), not by another algorithm. Also: HostLayout itself, the leaders
// a rooted collective gets, and that selection takes "hier" exactly when a group spans hosts.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/hierarchy.hpp"
#include "algorithms/host_layout.hpp"
#include "test_support.hpp"
#include "thread_comm.hpp"
#include "values.hpp"

namespace kolo::testing {
namespace {

using algo::CollArgs;
using algo::CollKind;
using algo::HostLayout;

TEST(HostLayout, NumbersHostsInOrderOfFirstRank) {
  const HostLayout h = HostLayout::from_ids({"b", "a", "b", "c", "a"});
  EXPECT_EQ(h.host_of, (std::vector<int>{0, 1, 0, 2, 1}));
  ASSERT_EQ(h.num_hosts(), 3);
  EXPECT_EQ(h.members[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(h.members[1], (std::vector<int>{1, 4}));
  EXPECT_EQ(h.members[2], (std::vector<int>{3}));
  EXPECT_TRUE(h.hierarchical());
  EXPECT_FALSE(h.uniform_blocks());
}

TEST(HostLayout, HierarchicalNeedsTwoHostsAndASharedHost) {
  EXPECT_FALSE(HostLayout::single_host(4).hierarchical());
  EXPECT_FALSE(HostLayout::from_indices({0, 1, 2, 3}).hierarchical());
  EXPECT_TRUE(HostLayout::from_indices({0, 0, 1}).hierarchical());
  EXPECT_TRUE(HostLayout::from_indices({0, 0, 1, 1}).uniform_blocks());
  EXPECT_FALSE(HostLayout::from_indices({0, 1, 0, 1}).uniform_blocks());
  EXPECT_FALSE(HostLayout::from_indices({0, 0, 0, 1}).uniform_blocks());
  EXPECT_TRUE(HostLayout::single_host(3).uniform_blocks());
}

TEST(HostLayout, RestrictedToASubgroupRenumbers) {
  const HostLayout h = HostLayout::from_indices({0, 0, 1, 1, 2, 2});
  const HostLayout sub = h.restricted_to({5, 2, 3});
  EXPECT_EQ(sub.host_of, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(sub.members[1], (std::vector<int>{1, 2}));
}

// Leaders: each host's lowest rank, but the root leads its own host.
TEST(HostPlan, TheRootLeadsItsHost) {
  ThreadWorld world(6, {.hosts = {0, 0, 0, 1, 1, 1}});
  CollArgs a;
  a.kind = CollKind::broadcast;
  std::vector<algo::HostPlan> plans(6);
  ASSERT_EQ(world.run("plan", [&](int r) { plans[static_cast<size_t>(r)] = algo::plan_hosts(*world.make_comm(r, a), 4); }), "");
  EXPECT_EQ(plans[0].leaders, (std::vector<int>{0, 4}));
  EXPECT_TRUE(plans[4].is_leader());
  EXPECT_FALSE(plans[3].is_leader());
  EXPECT_EQ(plans[3].leader_local, 1);
  EXPECT_EQ(plans[5].my_host, 1);
}

const std::vector<std::vector<int>>& layouts() {
  static const std::vector<std::vector<int>> all = {
      {0, 0, 1, 1, 2, 2, 3, 3},  // 4 hosts x 2: the shape
      {0, 0, 0, 1, 1, 1},        // 2 hosts x 3
      {0, 0, 0, 1, 2, 2},        // uneven, with a one-rank host
      {0, 1, 0, 1, 0, 1},        // hosts not in consecutive blocks
      {0, 1, 2, 3},              // one rank per host
      {0, 0, 0, 0},              // one host
      {0, 0, 1, 1, 1, 2, 2, 0},  // the first host's ranks at both ends
  };
  return all;
}

std::string layout_name(const std::vector<int>& hosts) {
  std::string s;
  for (int h : hosts) s += std::to_string(h);
  return "hosts " + s;
}

struct Case {
  DataType dtype;
  ReduceOp op;
};

std::vector<Case> reduction_cases() {
  return {{DataType::int32, ReduceOp(ReduceKind::sum)}, {DataType::float32, ReduceOp(ReduceKind::avg)},
          {DataType::int64, ReduceOp(ReduceKind::max)}, {DataType::float16, ReduceOp(ReduceKind::sum)},
          {DataType::uint8, ReduceOp(ReduceKind::bxor)}};
}

const std::vector<size_t> kCounts = {0, 1, 7, 61, 1000};

TEST(Hierarchical, AllreduceEveryLayoutInAndOutOfPlace) {
  const algo::Algorithm& hier = algorithm(CollKind::allreduce, "hier");
  for (const auto& hosts : layouts())
    for (const Case& c : reduction_cases())
      for (size_t count : kCounts)
        for (bool in_place : {false, true}) {
          const int P = static_cast<int>(hosts.size());
          const size_t es = dtype_size(c.dtype);
          std::vector<GuardedBuffer> send, recv;
          std::vector<CollArgs> args;
          for (int r = 0; r < P; ++r) {
            send.emplace_back(count * es);
            recv.emplace_back(count * es);
          }
          for (int r = 0; r < P; ++r) {
            for (size_t i = 0; i < count; ++i) store_input(c.op, c.dtype, send[r].data(), i, P, r, i);
            CollArgs a;
            a.kind = CollKind::allreduce;
            a.dtype = c.dtype;
            a.op = c.op;
            a.count = count;
            a.send = send[r].data();
            a.recv = in_place ? send[r].data() : recv[r].data();
            args.push_back(a);
          }
          const std::string what = layout_name(hosts) + ", " + dtype_name(c.dtype) + " " + describe(c.op) + ", count " +
                                   std::to_string(count) + (in_place ? ", in place" : "");
          ASSERT_EQ(run_algorithm(hier, args, {.chunk_bytes = 16, .hosts = hosts}), "") << what;
          for (int r = 0; r < P; ++r) {
            const void* out = args[r].recv;
            ASSERT_TRUE(send[r].guards_intact() && recv[r].guards_intact()) << what << ": rank " << r;
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(check_reduced(c.op, c.dtype, P, out, i, i), "") << what << ": rank " << r << " element " << i;
          }
        }
}

TEST(Hierarchical, ReduceScatterEveryLayout) {
  const algo::Algorithm& hier = algorithm(CollKind::reduce_scatter, "hier");
  for (const auto& hosts : layouts())
    for (const Case& c : reduction_cases())
      for (size_t count : kCounts)
        for (bool in_place : {false, true}) {
          const int P = static_cast<int>(hosts.size());
          const size_t es = dtype_size(c.dtype), total = count * static_cast<size_t>(P);
          std::vector<GuardedBuffer> send, recv;
          std::vector<CollArgs> args;
          for (int r = 0; r < P; ++r) {
            send.emplace_back(total * es);
            recv.emplace_back(count * es);
          }
          for (int r = 0; r < P; ++r) {
            for (size_t i = 0; i < total; ++i) store_input(c.op, c.dtype, send[r].data(), i, P, r, i);
            CollArgs a;
            a.kind = CollKind::reduce_scatter;
            a.dtype = c.dtype;
            a.op = c.op;
            a.count = count;
            a.send = send[r].data();
            a.recv = in_place ? send[r].data() + static_cast<size_t>(r) * count * es : recv[r].data();
            args.push_back(a);
          }
          const std::string what = layout_name(hosts) + ", " + dtype_name(c.dtype) + " " + describe(c.op) + ", count " +
                                   std::to_string(count) + (in_place ? ", in place" : "");
          ASSERT_EQ(run_algorithm(hier, args, {.chunk_bytes = 16, .hosts = hosts}), "") << what;
          for (int r = 0; r < P; ++r)
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(check_reduced(c.op, c.dtype, P, args[r].recv, i, static_cast<size_t>(r) * count + i), "")
                  << what << ": rank " << r << " element " << i;
        }
}

TEST(Hierarchical, AllgatherEveryLayout) {
  const algo::Algorithm& hier = algorithm(CollKind::allgather, "hier");
  for (const auto& hosts : layouts())
    for (size_t es : {size_t{1}, size_t{4}, size_t{8}})
      for (size_t count : kCounts)
        for (bool in_place : {false, true}) {
          const int P = static_cast<int>(hosts.size());
          std::vector<GuardedBuffer> send, recv;
          std::vector<CollArgs> args;
          for (int r = 0; r < P; ++r) {
            send.emplace_back(count * es);
            recv.emplace_back(count * es * static_cast<size_t>(P));
          }
          for (int r = 0; r < P; ++r) {
            unsigned char* own = in_place ? recv[r].data() + static_cast<size_t>(r) * count * es : send[r].data();
            fill_pattern(own, count, es, r);
            CollArgs a;
            a.kind = CollKind::allgather;
            a.dtype = es == 1 ? DataType::uint8 : es == 4 ? DataType::int32 : DataType::float64;
            a.count = count;
            a.send = own;
            a.recv = recv[r].data();
            args.push_back(a);
          }
          const std::string what = layout_name(hosts) + ", " + std::to_string(es) + "-byte elements, count " +
                                   std::to_string(count) + (in_place ? ", in place" : "");
          ASSERT_EQ(run_algorithm(hier, args, {.chunk_bytes = 16, .hosts = hosts}), "") << what;
          for (int r = 0; r < P; ++r) {
            ASSERT_TRUE(recv[r].guards_intact()) << what << ": rank " << r;
            for (int src = 0; src < P; ++src)
              ASSERT_EQ(check_pattern(recv[r].data() + static_cast<size_t>(src) * count * es, count, es, src), "")
                  << what << ": rank " << r << ", block of rank " << src;
          }
        }
}

TEST(Hierarchical, BroadcastEveryLayoutAndRoot) {
  const algo::Algorithm& hier = algorithm(CollKind::broadcast, "hier");
  for (const auto& hosts : layouts()) {
    const int P = static_cast<int>(hosts.size());
    for (int root = 0; root < P; ++root)
      for (size_t count : kCounts) {
        const size_t es = 4;
        std::vector<GuardedBuffer> buf;
        std::vector<CollArgs> args;
        for (int r = 0; r < P; ++r) buf.emplace_back(count * es, 0xEE);
        fill_pattern(buf[static_cast<size_t>(root)].data(), count, es, root);
        for (int r = 0; r < P; ++r) {
          CollArgs a;
          a.kind = CollKind::broadcast;
          a.dtype = DataType::float32;
          a.count = count;
          a.root = root;
          a.send = buf[r].data();
          a.recv = buf[r].data();
          args.push_back(a);
        }
        const std::string what = layout_name(hosts) + ", root " + std::to_string(root) + ", count " + std::to_string(count);
        ASSERT_EQ(run_algorithm(hier, args, {.chunk_bytes = 16, .hosts = hosts}), "") << what;
        for (int r = 0; r < P; ++r) ASSERT_EQ(check_pattern(buf[r].data(), count, es, root), "") << what << ": rank " << r;
      }
  }
}

// Selection: "hier" above KOLO_SMALL_BYTES when the group spans hosts with a shared host;
// all-gather and reduce-scatter only on equal consecutive blocks.
class HierSelect : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* v = std::getenv("KOLO_ALGO");
    saved_ = v ? std::optional<std::string>(v) : std::nullopt;
    unsetenv("KOLO_ALGO");
    tunables_.small_bytes = 1024;
    tunables_.tree_max_bytes = 8192;
    tunables_.chunk_bytes = 1024;
  }
  void TearDown() override {
    if (saved_) setenv("KOLO_ALGO", saved_->c_str(), 1);
  }
  std::string pick(CollKind kind, size_t bytes, const std::vector<int>& hosts, const std::string& requested = "") {
    CollArgs a;
    a.kind = kind;
    a.dtype = DataType::uint8;
    a.count = bytes;
    return algo::select_algorithm(a, HostLayout::from_indices(hosts), requested, tunables_).name;
  }
  algo::SelectionTunables tunables_;
  std::optional<std::string> saved_;
};

TEST_F(HierSelect, SpanningHostsTakesHierAboveTheSmallThreshold) {
  const std::vector<int> four_by_two = {0, 0, 1, 1, 2, 2, 3, 3};
  for (CollKind k : {CollKind::allreduce, CollKind::broadcast, CollKind::allgather, CollKind::reduce_scatter}) {
    EXPECT_EQ(pick(k, 1 << 20, four_by_two), "hier") << algo::coll_name(k);
    EXPECT_NE(pick(k, 512, four_by_two), "hier") << algo::coll_name(k) << ": small messages stay latency-optimal";
    EXPECT_NE(pick(k, 1 << 20, {0, 0, 0, 0, 0, 0, 0, 0}), "hier") << algo::coll_name(k) << ": one host";
    EXPECT_NE(pick(k, 1 << 20, {0, 1, 2, 3}), "hier") << algo::coll_name(k) << ": one rank per host";
  }
  EXPECT_EQ(pick(CollKind::allreduce, 1 << 20, {0, 1, 0, 1}), "hier");
  EXPECT_EQ(pick(CollKind::allgather, 1 << 20, {0, 1, 0, 1}), "ring") << "blocks not consecutive";
  EXPECT_EQ(pick(CollKind::reduce_scatter, 1 << 20, {0, 0, 0, 1}), "ring") << "hosts of unequal size";
  EXPECT_EQ(pick(CollKind::reduce, 1 << 20, four_by_two), "tree") << "no hierarchical reduce";
}

TEST_F(HierSelect, ARequestForHierIsHonouredOrGivesWayWhenItCannotRun) {
  EXPECT_EQ(pick(CollKind::allreduce, 16, {0, 0, 0, 0}, "hier"), "hier");
  EXPECT_EQ(pick(CollKind::allgather, 1 << 20, {0, 1, 0, 1}, "hier"), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, 1 << 20, {0, 0, 1, 1}, "ring"), "ring");
}

}  // namespace
}  // namespace kolo::testing

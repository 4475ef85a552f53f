// select_algorithm(): requests by name or per-collective list, refusals naming the valid
// choices, and the automatic choice by size and rank count.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "algorithms/algorithm.hpp"
#include "kolo/error.hpp"

namespace kolo::algo {
namespace {

// Pins the tunables select reads, restoring the environment afterwards.
class Select : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) {
      const char* v = std::getenv(name);
      saved_.push_back(v ? std::optional<std::string>(v) : std::nullopt);
    }
    setenv("KOLO_SMALL_BYTES", "1024", 1);
    setenv("KOLO_TREE_MAX_BYTES", "8192", 1);
    setenv("KOLO_CHUNK_BYTES", "1024", 1);
    unsetenv("KOLO_ALGO");
    unsetenv("KOLO_TWOSHOT_MIN_BYTES");
    setenv("KOLO_HOST_CPUS", "64", 1);  // idle cores unless a test says otherwise
  }
  void TearDown() override {
    for (size_t i = 0; i < std::size(kNames); ++i) {
      if (saved_[i]) setenv(kNames[i], saved_[i]->c_str(), 1);
      else unsetenv(kNames[i]);
    }
  }
  static CollArgs args(CollKind kind, size_t count, DataType t = DataType::float32) {
    CollArgs a;
    a.kind = kind;
    a.count = count;
    a.dtype = t;
    return a;
  }
  static std::string pick(CollKind kind, size_t bytes, int nranks, const std::string& requested = "") {
    return select_algorithm(args(kind, bytes, DataType::uint8), nranks, requested).name;
  }
  static constexpr const char* kNames[] = {"KOLO_SMALL_BYTES", "KOLO_TREE_MAX_BYTES", "KOLO_CHUNK_BYTES", "KOLO_ALGO",
                                           "KOLO_SELECT", "KOLO_HOST_CPUS", "KOLO_TWOSHOT_MIN_BYTES"};
  std::vector<std::optional<std::string>> saved_;
};

// Two ranks: every collective the pair exchange serves takes it up to KOLO_SMALL_BYTES (1024
// here), on one host or two, and nothing else ever does: not above, not at other rank counts,
// not the collectives it does not serve.
TEST_F(Select, TwoRanksTakeThePairExchangeWhileSmall) {
  const CollKind served[] = {CollKind::broadcast, CollKind::reduce,  CollKind::allreduce,
                             CollKind::reduce_scatter, CollKind::allgather, CollKind::gather,
                             CollKind::scatter,   CollKind::alltoall, CollKind::barrier};
  for (CollKind k : served) {
    EXPECT_EQ(pick(k, 1, 2), "pair") << coll_name(k);
    EXPECT_EQ(pick(k, 1024, 2), "pair") << coll_name(k);
    const SelectionTunables t = SelectionTunables::from_config();
    EXPECT_STREQ(select_algorithm(args(k, 1024, DataType::uint8), HostLayout::from_indices({0, 1}), "", t).name, "pair")
        << coll_name(k) << " across two hosts";
    if (k != CollKind::barrier) EXPECT_NE(pick(k, 1025, 2), "pair") << coll_name(k);
    for (int n : {1, 3, 4, 8}) EXPECT_NE(pick(k, 8, n), "pair") << coll_name(k) << " at " << n << " ranks";
  }
  for (CollKind k : {CollKind::alltoallv, CollKind::send, CollKind::recv}) EXPECT_NE(pick(k, 8, 2), "pair");
  // Requested by name where it cannot run, the automatic choice takes over.
  EXPECT_EQ(pick(CollKind::allreduce, 8, 3, "pair"), pick(CollKind::allreduce, 8, 3));
}

TEST_F(Select, AutomaticAllreduceGoesRdThenTreeThenRing) {
  EXPECT_EQ(pick(CollKind::allreduce, 0, 8), "rd");
  EXPECT_EQ(pick(CollKind::allreduce, 1024, 8), "rd");
  EXPECT_EQ(pick(CollKind::allreduce, 1025, 8), "tree");
  EXPECT_EQ(pick(CollKind::allreduce, 8192, 8), "tree");
  EXPECT_EQ(pick(CollKind::allreduce, 8193, 8), "ring");
  // Thresholds are in bytes, not elements.
  EXPECT_EQ(select_algorithm(args(CollKind::allreduce, 2048, DataType::float64), 8, "").name, std::string("ring"));
}

// Ranks outnumbering the host's CPUs: a large all-reduce takes twoshot's two rounds instead of
// the ring's 2(P-1) (measured on 2 cores, docs/PERFORMANCE.md), under either mode of choice; not
// below KOLO_TWOSHOT_MIN_BYTES, not at 2 ranks or beyond 8, not with CPUs to spare, not across
// hosts, not for other collectives, and never when the threshold is 0.
TEST_F(Select, OversubscribedHostTakesTwoshotForLargeAllreduce) {
  const size_t big = 8 << 20;
  EXPECT_EQ(pick(CollKind::allreduce, big, 4), "ring");  // 64 CPUs
  setenv("KOLO_HOST_CPUS", "2", 1);
  for (int n : {3, 4, 8}) EXPECT_EQ(pick(CollKind::allreduce, big, n), "twoshot") << n << " ranks";
  EXPECT_EQ(pick(CollKind::allreduce, big - 1, 4), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, big, 2), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, big, 9), "ring");
  EXPECT_EQ(pick(CollKind::reduce_scatter, big, 4), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, big, 4, "ring"), "ring");  // a request still wins
  setenv("KOLO_HOST_CPUS", "4", 1);
  EXPECT_EQ(pick(CollKind::allreduce, big, 4), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, big, 5), "twoshot");
  // Under the cost model (which ties ring and twoshot) the rule still decides.
  setenv("KOLO_SELECT", "model", 1);
  unsetenv("KOLO_SMALL_BYTES");
  unsetenv("KOLO_TREE_MAX_BYTES");
  EXPECT_EQ(pick(CollKind::allreduce, big, 5), "twoshot");
  EXPECT_EQ(pick(CollKind::allreduce, 64 << 20, 5), "twoshot");
  const SelectionTunables t = SelectionTunables::from_config();
  EXPECT_EQ(t.host_cpus, 4);
  EXPECT_STREQ(select_algorithm(args(CollKind::allreduce, big, DataType::uint8), HostLayout::from_indices({0, 0, 0, 1, 1, 1}),
                                "", t)
                   .name,
               "hier");
  setenv("KOLO_TWOSHOT_MIN_BYTES", "0", 1);
  EXPECT_NE(pick(CollKind::allreduce, 64 << 20, 5), "twoshot");
  // Unset, the CPUs online.
  unsetenv("KOLO_HOST_CPUS");
  EXPECT_GT(SelectionTunables::from_config().host_cpus, 0);
}

TEST_F(Select, TwoRanksTakeTheRingAboveSmallMessages) {
  // The threshold rule: with two ranks the tree is one edge; the ring halves each rank's reduction.
  EXPECT_EQ(pick(CollKind::allreduce, 1024, 2), "pair");
  EXPECT_EQ(pick(CollKind::allreduce, 1025, 2), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, 4096, 3), "tree");
  // And under the cost model, which two ranks on one host do not consult.
  setenv("KOLO_SELECT", "model", 1);
  unsetenv("KOLO_SMALL_BYTES");
  unsetenv("KOLO_TREE_MAX_BYTES");
  EXPECT_EQ(pick(CollKind::allreduce, 64 << 10, 2), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, 256 << 10, 2), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, 1024, 2), "pair");
  unsetenv("KOLO_SELECT");
}

TEST_F(Select, AutomaticChoiceForTheOtherCollectives) {
  EXPECT_EQ(pick(CollKind::reduce_scatter, 1024, 4), "direct");
  EXPECT_EQ(pick(CollKind::reduce_scatter, 1025, 4), "ring");
  EXPECT_EQ(pick(CollKind::allgather, 1024, 8), "rd");
  EXPECT_EQ(pick(CollKind::allgather, 1025, 8), "ring");
  EXPECT_EQ(pick(CollKind::reduce, 1024, 4), "direct");
  EXPECT_EQ(pick(CollKind::reduce, 1025, 4), "tree");
  EXPECT_EQ(pick(CollKind::gather, 1024, 16), "tree");
  EXPECT_EQ(pick(CollKind::gather, 1025, 16), "direct");
  EXPECT_EQ(pick(CollKind::scatter, 1024, 8), "tree");
  EXPECT_EQ(pick(CollKind::scatter, 1025, 8), "direct");
  // Broadcast: the chain only once the buffer is big and spans a chunk per rank.
  EXPECT_EQ(pick(CollKind::broadcast, 8192, 4), "tree");
  EXPECT_EQ(pick(CollKind::broadcast, 8193, 4), "ring");
  EXPECT_EQ(pick(CollKind::broadcast, 9000, 16), "tree");
  EXPECT_EQ(pick(CollKind::broadcast, 16 * 1024, 16), "ring");
  EXPECT_EQ(pick(CollKind::alltoall, 1 << 20, 4), "pairwise");
  EXPECT_EQ(pick(CollKind::alltoall, 8192, 4), "direct");  // one round while blocks are small
  EXPECT_EQ(pick(CollKind::alltoall, 8193, 8), "pairwise");
  EXPECT_EQ(pick(CollKind::alltoall, 8, 2), "pair");  // one exchange
  EXPECT_EQ(pick(CollKind::alltoallv, 0, 4), "pairwise");
  EXPECT_EQ(pick(CollKind::barrier, 0, 2), "pair");  // one exchange
  EXPECT_EQ(pick(CollKind::barrier, 0, 3), "central");
  EXPECT_EQ(pick(CollKind::barrier, 0, 4), "central");
  EXPECT_EQ(pick(CollKind::barrier, 0, 8), "central");
  EXPECT_EQ(pick(CollKind::barrier, 0, 9), "dissemination");
  EXPECT_EQ(pick(CollKind::send, 1 << 20, 2), "direct");
  EXPECT_EQ(pick(CollKind::recv, 1 << 20, 2), "direct");
}

// One host, small messages (the direct path's costs, measured by scripts/bench/algo-ab.sh): one round
// of P-1 messages up to 4 ranks, while what that round moves stays small.
TEST_F(Select, OneHostSmallMessagesTakeOneRoundUpToFourRanks) {
  setenv("KOLO_SMALL_BYTES", "32768", 1);
  for (int p : {3, 4}) {
    EXPECT_EQ(pick(CollKind::allreduce, 8, p), "oneshot") << p;
    EXPECT_EQ(pick(CollKind::allgather, 8, p), "direct") << p;
    EXPECT_EQ(pick(CollKind::allgather, 32768, p), "direct") << p;
    EXPECT_EQ(pick(CollKind::gather, 8, p), "direct") << p;
  }
  EXPECT_EQ(pick(CollKind::allreduce, 2048, 3), "oneshot");  // 2 x 2 KiB sent
  EXPECT_EQ(pick(CollKind::allreduce, 2049, 3), "rd");
  EXPECT_EQ(pick(CollKind::allreduce, 1365, 4), "oneshot");  // 3 x 1365 B
  EXPECT_EQ(pick(CollKind::allreduce, 1366, 4), "rd");
  EXPECT_EQ(pick(CollKind::allreduce, 8, 2), "pair");  // one exchange
  EXPECT_EQ(pick(CollKind::allreduce, 8, 5), "rd");
  EXPECT_EQ(pick(CollKind::allgather, 8, 5), "rd");
  EXPECT_EQ(pick(CollKind::gather, 8, 8), "direct");
  EXPECT_EQ(pick(CollKind::gather, 8, 9), "tree");
  // The root's P-1 incoming blocks within 8 KiB: direct; above, the tree's fewer messages.
  EXPECT_EQ(pick(CollKind::reduce, 2730, 4), "direct");
  EXPECT_EQ(pick(CollKind::reduce, 2731, 4), "tree");
  EXPECT_EQ(pick(CollKind::reduce, 1170, 8), "direct");
  EXPECT_EQ(pick(CollKind::reduce, 1171, 8), "tree");
  // Scatter's tree while the root's buffer is within 16 KiB (its forwarded blocks stay small).
  // Up to 4 ranks the scatter is direct at every size (no rank forwards another's block).
  for (int p : {3, 4}) {
    EXPECT_EQ(pick(CollKind::scatter, 8, p), "direct") << p;
    EXPECT_EQ(pick(CollKind::scatter, 4096, p), "direct") << p;
  }
  EXPECT_EQ(pick(CollKind::scatter, 8, 5), "tree");
  EXPECT_EQ(pick(CollKind::scatter, 2048, 8), "tree");
  EXPECT_EQ(pick(CollKind::scatter, 2049, 8), "direct");
  // Broadcast: the root sends to each of 3-4 ranks while those P-1 copies stay within 4 KiB.
  for (int p : {3, 4}) EXPECT_EQ(pick(CollKind::broadcast, 8, p), "direct") << p;
  EXPECT_EQ(pick(CollKind::broadcast, 2048, 3), "direct");
  EXPECT_EQ(pick(CollKind::broadcast, 2049, 3), "tree");
  EXPECT_EQ(pick(CollKind::broadcast, 1365, 4), "direct");
  EXPECT_EQ(pick(CollKind::broadcast, 1366, 4), "tree");
  EXPECT_EQ(pick(CollKind::broadcast, 8, 5), "tree");
  EXPECT_EQ(pick(CollKind::broadcast, 8, 2), "pair");  // one send
  // The model (the default) agrees on one host: it does not decide below KOLO_SMALL_BYTES there.
  unsetenv("KOLO_SMALL_BYTES");
  EXPECT_EQ(pick(CollKind::allreduce, 8, 4), "oneshot");
  EXPECT_EQ(pick(CollKind::reduce, 8, 8), "direct");
  EXPECT_EQ(pick(CollKind::broadcast, 8, 4), "direct");
}

TEST_F(Select, OneRankTakesTheSmallMessageChoice) {
  EXPECT_EQ(pick(CollKind::allreduce, 1 << 20, 1), "rd");
  EXPECT_EQ(pick(CollKind::reduce_scatter, 1 << 20, 1), "direct");
  EXPECT_EQ(pick(CollKind::broadcast, 1 << 20, 1), "tree");
}

TEST_F(Select, APlainNameAppliesWhereItExistsAndIsAutomaticElsewhere) {
  EXPECT_EQ(pick(CollKind::allreduce, 10, 4, "ring"), "ring");
  EXPECT_EQ(pick(CollKind::broadcast, 10, 4, "ring"), "ring");
  EXPECT_EQ(pick(CollKind::reduce, 10, 4, "ring"), "direct");  // reduce has no ring
  EXPECT_EQ(pick(CollKind::barrier, 10, 4, "ring"), "central");
  EXPECT_EQ(pick(CollKind::barrier, 10, 4, "dissemination"), "dissemination");
  EXPECT_EQ(pick(CollKind::allreduce, 1 << 20, 4, " tree "), "tree");
  EXPECT_EQ(pick(CollKind::allreduce, 1 << 20, 4, "auto"), "ring");
}

TEST_F(Select, AListNamesCollectivesOneByOne) {
  const std::string spec = "allreduce=tree, broadcast=ring,reduce=auto";
  EXPECT_EQ(pick(CollKind::allreduce, 10, 4, spec), "tree");
  EXPECT_EQ(pick(CollKind::broadcast, 10, 4, spec), "ring");
  EXPECT_EQ(pick(CollKind::reduce, 10, 4, spec), "direct");
  EXPECT_EQ(pick(CollKind::allgather, 10, 8, spec), "rd");  // automatic
  EXPECT_EQ(pick(CollKind::reduce_scatter, 10, 4, "reduce_scatter=ring"), "ring");
}

TEST_F(Select, KoloAlgoAppliesWhenTheCallAsksForNothingAndTheCallWins) {
  setenv("KOLO_ALGO", "allreduce=ring", 1);
  EXPECT_EQ(pick(CollKind::allreduce, 10, 4), "ring");
  EXPECT_EQ(pick(CollKind::allreduce, 10, 4, "tree"), "tree");
  setenv("KOLO_ALGO", "direct", 1);
  EXPECT_EQ(pick(CollKind::gather, 1 << 20, 16), "direct");
  EXPECT_EQ(pick(CollKind::gather, 10, 16), "direct");     // automatic: tree
  EXPECT_EQ(pick(CollKind::allreduce, 10, 8), "rd");       // no direct all-reduce: automatic
}

// The group's memo answers exactly what select_algorithm answers, for any order of sizes and
// collectives, with the stamp's index; a per-call request is obeyed, never remembered.
TEST_F(Select, MemoAgreesWithSelectionAndIgnoresPerCallRequests) {
  const SelectionTunables t = SelectionTunables::from_config();
  const HostLayout hosts = HostLayout::from_indices({0, 0, 1, 1, 2, 2, 3, 3});
  SelectionMemo memo;
  const size_t sizes[] = {0, 1024, 1024, 1025, 8192, 8193, 8193, 1 << 20, 1024, 1 << 20, 7};
  const CollKind kinds[] = {CollKind::allreduce, CollKind::broadcast, CollKind::allgather, CollKind::reduce_scatter};
  for (int round = 0; round < 2; ++round)
    for (size_t bytes : sizes)
      for (CollKind k : kinds) {
        const CollArgs a = args(k, bytes, DataType::uint8);
        const Algorithm& expected = select_algorithm(a, hosts, "", t);
        const SelectionMemo::Choice c = memo.choose(a, hosts, "", t);
        ASSERT_EQ(c.algorithm, &expected) << coll_name(k) << " " << bytes;
        EXPECT_EQ(c.wire_id, expected.wire_id);
        EXPECT_EQ(algorithm_by_wire_id(c.wire_id), &expected);
      }
  // 10 bytes of allreduce: the memo has "rd" for it; a request for "ring" wins, and is not
  // remembered for the next call that asks for nothing.
  const CollArgs small = args(CollKind::allreduce, 10, DataType::uint8);
  EXPECT_STREQ(memo.choose(small, hosts, "", t).algorithm->name, "rd");
  EXPECT_STREQ(memo.choose(small, hosts, "ring", t).algorithm->name, "ring");
  EXPECT_STREQ(memo.choose(small, hosts, "", t).algorithm->name, "rd");
}

void expect_refused(const std::string& spec, CollKind kind, const std::vector<std::string>& mentions) {
  try {
    CollArgs a;
    a.kind = kind;
    select_algorithm(a, 4, spec);
    ADD_FAILURE() << "'" << spec << "' was accepted for " << coll_name(kind);
  } catch (const InvalidArgument& e) {
    for (const std::string& m : mentions)
      EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what() << " should mention " << m;
  }
}

TEST_F(Select, RefusesNamesNoCollectiveHasListingTheValidOnes) {
  expect_refused("bogus", CollKind::allreduce, {"bogus", "ring, tree, rd"});
  expect_refused("bogus", CollKind::barrier, {"bogus", "dissemination, central"});
  expect_refused("allreduce=direct", CollKind::allreduce, {"allreduce", "direct", "ring, tree, rd"});
  // A bad entry for another collective is refused too, so a typo never goes unnoticed.
  expect_refused("allreduce=ring,broadcast=rd", CollKind::allreduce, {"broadcast", "rd", "ring, tree"});
  expect_refused("allredcue=ring", CollKind::allreduce, {"unknown collective 'allredcue'", "allreduce"});
  expect_refused("allreduce=ring,tree", CollKind::allreduce, {"'tree'", "collective=algorithm"});
  setenv("KOLO_ALGO", "nonsense", 1);
  expect_refused("", CollKind::allreduce, {"nonsense"});
}

}  // namespace
}  // namespace kolo::algo

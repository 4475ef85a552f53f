// The cost model (src/algorithms/cost_model.hpp): its formulas against values worked out by
// hand, parameter parsing, monotonic predictions, and selection under KOLO_SELECT=model.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_model.hpp"
#include "kolo/error.hpp"

namespace kolo::algo {
namespace {

// Round numbers so the hand computations stay readable: shm 1 us + 1 ns/B, net 10 us + 10 ns/B,
// reduction 0.5 ns/B, chunks of 1 MiB.
CostModel hand_model() {
  CostModel m;
  m.shm = {1e-6, 1e-9};
  m.net = {10e-6, 10e-9};
  m.gamma = 0.5e-9;
  m.chunk = 1 << 20;
  return m;
}

// Host index per rank: `hosts` hosts of `per` consecutive ranks.
std::vector<int> by_host(int hosts, int per) {
  std::vector<int> index;
  for (int h = 0; h < hosts; ++h)
    for (int i = 0; i < per; ++i) index.push_back(h);
  return index;
}

GroupShape shape(int hosts, int per) { return GroupShape::of(HostLayout::from_indices(by_host(hosts, per))); }

double predict(CollKind kind, const char* name, double bytes, const GroupShape& g) {
  return predict_seconds(kind, name, bytes, g, hand_model());
}

TEST(CostModel, AllreduceFormulasMatchHandComputations) {
  const GroupShape one4 = shape(1, 4);
  // ring, P=4, n=4096: 2*3*(1us + 1024 B*1ns) + 3*1024*0.5ns
  EXPECT_NEAR(predict(CollKind::allreduce, "ring", 4096, one4), 13.68e-6, 1e-12);
  // rd, P=4: 2 exchanges of (1us + 4096 ns + 2048 ns)
  EXPECT_NEAR(predict(CollKind::allreduce, "rd", 4096, one4), 14.288e-6, 1e-12);
  // rd, P=3, n=1000: one exchange (2.5 us) plus fold in and out (2*(1+1) us + 0.5 us)
  EXPECT_NEAR(predict(CollKind::allreduce, "rd", 1000, shape(1, 3)), 7e-6, 1e-12);
  // twoshot, P=4, n=4096: 2 rounds of 3 messages of 1024 B, 3 reductions of 1024 B
  EXPECT_NEAR(predict(CollKind::allreduce, "twoshot", 4096, one4), 2 * (3e-6 + 3 * 1024e-9) + 1.536e-6, 1e-12);
  // tree, P=4, n=4096: D=2; halves of 2048, two children's worth (4096 B) per rank and direction:
  // up and down, each one fill stage and the stream, 2 * 2 * (1us + 4096ns), plus 4096 B reduced
  EXPECT_NEAR(predict(CollKind::allreduce, "tree", 4096, one4), 2 * 2 * (1e-6 + 4096e-9) + 4096 * 0.5e-9, 1e-12);

  // 4 hosts x 2 ranks, n = 4 MiB (4 chunks, one step each way: chunking adds no alpha):
  //   hier: binomial reduce on shm (1us + 4 MiB*1.5ns) + leaders' ring on net
  //         6*(10us + 1 MiB*10ns) + 3*1 MiB*0.5ns + binomial broadcast (1us + 4 MiB*1ns)
  const GroupShape four2 = shape(4, 2);
  const double mib = 1 << 20;
  const double hier = (1e-6 + 4 * mib * 1.5e-9) + 6 * (10e-6 + mib * 10e-9) + 3 * mib * 0.5e-9 + (1e-6 + 4 * mib * 1e-9);
  EXPECT_NEAR(predict(CollKind::allreduce, "hier", 4 * mib, four2), hier, 1e-12);
  EXPECT_NEAR(hier, 75.035184e-3, 1e-9);
  //   flat ring: P=8 over the net link, segments of 512 KiB: 14*(10us + 512 KiB*10ns) + 7*512 KiB*0.5ns
  EXPECT_NEAR(predict(CollKind::allreduce, "ring", 4 * mib, four2), 75.375328e-3, 1e-9);
  //   tree: halves of 2 MiB, first chunk (1 MiB, two children's: 2 MiB) down 3 levels, then the
  //   remaining 1 MiB of two children's shares streams with the host link shared by two edges
  EXPECT_NEAR(predict(CollKind::allreduce, "tree", 4 * mib, four2),
              2 * (3 * (10e-6 + 2 * mib * 10e-9) + 2 * mib * 10e-9 * 2) + 2 * (2 * mib) * 0.5e-9, 1e-12);
  //   rd: the first exchange inside a host (shm), the next two across with both ranks of a host
  //   on its link (2 * 10 ns/B)
  const double n = 4 * mib;
  EXPECT_NEAR(predict(CollKind::allreduce, "rd", n, four2),
              (1e-6 + n * 1e-9 + n * 0.5e-9) + 2 * (10e-6 + n * 20e-9 + n * 0.5e-9), 1e-12);
}

TEST(CostModel, OtherCollectivesMatchHandComputations) {
  const double mib = 1 << 20;
  // broadcast chain, P=4 on shm, chunks of 1 MiB: 2 chunk stages to fill, then 4 MiB stream
  EXPECT_NEAR(predict(CollKind::broadcast, "ring", 4 * mib, shape(1, 4)), 2 * (1e-6 + mib * 1e-9) + (1e-6 + 4 * mib * 1e-9),
              1e-12);
  // broadcast binomial, P=4: the root sends the 4 MiB twice
  EXPECT_NEAR(predict(CollKind::broadcast, "tree", 4 * mib, shape(1, 4)), 2 * (1e-6 + 4 * mib * 1e-9), 1e-12);
  // gather binomial, P=8 on one host, blocks of 1000 B: 3 messages, and the blocks move as
  // often as their ranks are deep in the tree (1+1+2+1+2+2+3 = 12 block moves, all through the
  // host's memory); across 8 hosts, 7 blocks through the root
  EXPECT_NEAR(predict(CollKind::gather, "tree", 1000, shape(1, 8)), 3e-6 + 12000e-9, 1e-12);
  EXPECT_NEAR(predict(CollKind::scatter, "tree", 1000, shape(1, 8)), 3e-6 + 12000e-9, 1e-12);
  EXPECT_NEAR(predict(CollKind::gather, "tree", 1000, shape(8, 1)), 30e-6 + 70000e-9, 1e-12);
  EXPECT_NEAR(predict(CollKind::gather, "direct", 1000, shape(1, 8)), 7e-6 + 7000e-9, 1e-12);
  // reduce-scatter ring, P=4, blocks of 1000 B: 3 steps of (1us + 1000*1ns + 1000*0.5ns)
  EXPECT_NEAR(predict(CollKind::reduce_scatter, "ring", 1000, shape(1, 4)), 3 * 2.5e-6, 1e-12);
  // all-gather rd, P=4, blocks of 1000: exchanges of 1000 then 2000 B
  EXPECT_NEAR(predict(CollKind::allgather, "rd", 1000, shape(1, 4)), 2e-6 + 3000e-9, 1e-12);
  // reduce direct, P=4: 3 inputs into the root, each reduced
  EXPECT_NEAR(predict(CollKind::reduce, "direct", 1000, shape(1, 4)), 3 * (1e-6 + 1000e-9 + 500e-9), 1e-12);
  // Collectives with one algorithm, and unknown names, have no formula.
  EXPECT_LT(predict(CollKind::barrier, "dissemination", 0, shape(1, 4)), 0);
  EXPECT_LT(predict(CollKind::allreduce, "nonesuch", 1000, shape(1, 4)), 0);
}

TEST(CostModel, PredictionsGrowWithSize) {
  for (const GroupShape& g : {shape(1, 8), shape(4, 2), shape(1, 3), shape(3, 4)})
    for (const Algorithm* a : all_algorithms())
      for (int k = 0; k < kNumCollKinds; ++k) {
      const auto kind = static_cast<CollKind>(k);
      if (!a->serves.has(kind)) continue;
      // A hierarchical algorithm changes its inter-host phase (rd or direct within one chunk,
      // ring above; allreduce_hier.cpp and friends), and the model follows it: its time may step
      // down where that switch happens. Above every switch it must grow too.
      const double from = std::string(a->name) == "hier" ? double(64 << 20) : 1;
      double last = -1;
      for (double bytes = from; bytes <= double(1 << 30); bytes *= 2) {
        const double t = predict(kind, a->name, bytes, g);
        if (t < 0) break;  // no formula for this one
        EXPECT_GE(t, last) << coll_name(kind) << " " << a->name << " at " << bytes << " B on " << g.ranks << " ranks";
        last = t;
      }
    }
}

TEST(CostModel, GroupShapeCountsRanksHostsAndTheFullestHost) {
  const GroupShape g = GroupShape::of(HostLayout::from_indices({5, 5, 7, 5, 9}));
  EXPECT_EQ(g.ranks, 5);
  EXPECT_EQ(g.hosts, 3);
  EXPECT_EQ(g.per_host, 3) << "host 5 holds ranks 0, 1 and 3";
  EXPECT_EQ(GroupShape::of(HostLayout::single_host(6)).per_host, 6);
  EXPECT_EQ(GroupShape::of(HostLayout::from_indices({0, 1, 2})).per_host, 1);
}

TEST(CostModel, LinkParsing) {
  const LinkCost l = CostModel::parse_link("KOLO_MODEL_SHM", "2.5,4");
  EXPECT_DOUBLE_EQ(l.alpha, 2.5e-6);
  EXPECT_DOUBLE_EQ(l.beta, 0.25e-9);
  for (const char* bad : {"", "2.5", "2.5,", ",4", "x,4", "2.5,0", "2.5,-1", "-1,4", "2.5,4x", "nan,4"}) {
    try {
      CostModel::parse_link("KOLO_MODEL_NET", bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("KOLO_MODEL_NET"), std::string::npos) << e.what();
    }
  }
}

// Selection with the defaults of the config table (the fitted values): the environment is
// cleared of every tunable the choice reads, and restored afterwards.
class ModelSelect : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) {
      const char* v = std::getenv(name);
      saved_.push_back(v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
    // Idle cores: whether the machine running the test has more ranks than CPUs must not move
    // the choices below (KOLO_TWOSHOT_MIN_BYTES' rule has its own test in test_select.cpp).
    setenv("KOLO_HOST_CPUS", "64", 1);
  }
  void TearDown() override {
    for (size_t i = 0; i < std::size(kNames); ++i) {
      if (saved_[i]) setenv(kNames[i], saved_[i]->c_str(), 1);
      else unsetenv(kNames[i]);
    }
  }
  static std::string pick(CollKind kind, size_t bytes, const std::vector<int>& hosts) {
    CollArgs a;
    a.kind = kind;
    a.dtype = DataType::uint8;
    a.count = bytes;
    return select_algorithm(a, HostLayout::from_indices(hosts), "", SelectionTunables::from_config()).name;
  }
  static constexpr const char* kNames[] = {"KOLO_SMALL_BYTES", "KOLO_TREE_MAX_BYTES", "KOLO_CHUNK_BYTES", "KOLO_ALGO",
                                           "KOLO_SELECT",      "KOLO_MODEL_SHM",      "KOLO_MODEL_NET",
                                           "KOLO_MODEL_REDUCE_GBPS", "KOLO_HOST_CPUS", "KOLO_TWOSHOT_MIN_BYTES"};
  std::vector<std::optional<std::string>> saved_;
};

TEST_F(ModelSelect, DefaultIsTheModelUnlessAThresholdIsSet) {
  EXPECT_TRUE(SelectionTunables::from_config().use_model);
  setenv("KOLO_SMALL_BYTES", "1024", 1);
  EXPECT_FALSE(SelectionTunables::from_config().use_model);
  setenv("KOLO_SELECT", "model", 1);
  EXPECT_TRUE(SelectionTunables::from_config().use_model);
  setenv("KOLO_SELECT", "threshold", 1);
  unsetenv("KOLO_SMALL_BYTES");
  EXPECT_FALSE(SelectionTunables::from_config().use_model);
  setenv("KOLO_SELECT", "fastest", 1);
  EXPECT_THROW(SelectionTunables::from_config(), InvalidArgument);
  setenv("KOLO_SELECT", "model", 1);
  setenv("KOLO_MODEL_NET", "fast", 1);
  EXPECT_THROW(SelectionTunables::from_config(), InvalidArgument);
}

TEST_F(ModelSelect, OneHostTakesRdForSmallAndRingForLarge) {
  const std::vector<int> one_host(8, 0);
  EXPECT_EQ(pick(CollKind::allreduce, 8, one_host), "rd");
  EXPECT_EQ(pick(CollKind::allreduce, 1024, one_host), "rd");
  EXPECT_EQ(pick(CollKind::allreduce, 64 << 20, one_host), "ring");
  EXPECT_EQ(pick(CollKind::allgather, 8, one_host), "rd");
  EXPECT_EQ(pick(CollKind::allgather, 8 << 20, one_host), "ring");
  EXPECT_EQ(pick(CollKind::broadcast, 64 << 20, one_host), "ring");
}

// Measured at 4 ranks on 2 cores (docs/PERFORMANCE.md): the binomial tree's store-and-forward
// copies lose to direct from 32 KiB blocks; gather on one host goes direct at any size
// (scripts/bench/algo-ab.sh, 2026-11-26), and so does scatter up to 4 ranks (2026-11-27); at 8 ranks
// small scatters keep the tree's fewer messages at the root.
TEST_F(ModelSelect, OneHostGatherAndScatterGoDirectForLargeBlocks) {
  const std::vector<int> one_host(4, 0), eight(8, 0);
  EXPECT_EQ(pick(CollKind::scatter, 1024, one_host), "direct");
  EXPECT_EQ(pick(CollKind::scatter, 1024, eight), "tree");
  EXPECT_EQ(pick(CollKind::gather, 1024, one_host), "direct");
  for (CollKind k : {CollKind::gather, CollKind::scatter}) EXPECT_EQ(pick(k, 512 << 10, one_host), "direct");
}

TEST_F(ModelSelect, AcrossHostsLargeGoesHierSmallStaysFlat) {
  const std::vector<int> four_by_two = {0, 0, 1, 1, 2, 2, 3, 3};
  for (CollKind k : {CollKind::allreduce, CollKind::broadcast, CollKind::allgather, CollKind::reduce_scatter})
    EXPECT_EQ(pick(k, 16 << 20, four_by_two), "hier") << coll_name(k);
  // 16 hosts of 8: the hierarchical all-reduce and broadcast still win. (Reduce-scatter does
  // not: its leaders move 15/16 of what a flat ring moves per host link, and first reduce the
  // whole P-block input inside the host.)
  for (CollKind k : {CollKind::allreduce, CollKind::broadcast})
    EXPECT_EQ(pick(k, 16 << 20, by_host(16, 8)), "hier") << coll_name(k) << " on 16 x 8";
  EXPECT_NE(pick(CollKind::allreduce, 8, four_by_two), "hier") << "8 B: latency-bound, rd's 3 steps";
  // No hierarchical all-gather when the hosts' blocks are not consecutive: supports() rules it out.
  EXPECT_NE(pick(CollKind::allgather, 16 << 20, {0, 1, 0, 1}), "hier");
}

// The choice as the size grows on one host: once the model leaves rd for the ring, it never
// comes back (the crossover is where ring's 2(P-1) latencies are paid for by rd's log2 P full
// copies).
TEST_F(ModelSelect, OneCrossoverFromRdToRing) {
  const std::vector<int> one_host(8, 0);
  bool left_rd = false;
  for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 2) {
    const std::string name = pick(CollKind::allreduce, bytes, one_host);
    if (name != "rd") left_rd = true;
    else EXPECT_FALSE(left_rd) << "rd again at " << bytes << " B";
  }
  EXPECT_TRUE(left_rd);
}

TEST(CostModelSelect, ChallengerNeedsAClearWinAndSupportsDecides) {
  SelectionTunables t;
  t.small_bytes = 1024;
  t.tree_max_bytes = 8192;
  t.chunk_bytes = 1 << 20;
  t.use_model = true;
  t.model = hand_model();
  CollArgs a;
  a.dtype = DataType::uint8;
  // One host, 4 ranks, 64 KiB: ring and twoshot cost the same here (one chunk per segment); the
  // threshold rule's ring stays.
  a.count = 64 << 10;
  const HostLayout one4 = HostLayout::from_indices({0, 0, 0, 0});
  EXPECT_EQ(std::string(select_algorithm(a, one4, "", t).name), "ring");
  // With bytes free (no bandwidth or reduction cost) only messages count: rd's 2 beat ring's 6.
  t.model.shm = {10e-6, 0};
  t.model.gamma = 0;
  EXPECT_EQ(std::string(select_algorithm(a, one4, "", t).name), "rd");
  // Threshold mode ignores the model.
  t.use_model = false;
  EXPECT_EQ(std::string(select_algorithm(a, one4, "", t).name), "ring");
  // A forced algorithm wins over both.
  t.use_model = true;
  EXPECT_EQ(std::string(select_algorithm(a, one4, "tree", t).name), "tree");
}

}  // namespace
}  // namespace kolo::algo

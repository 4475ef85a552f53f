// The harness's check (bench/common/check.hpp), which kolo-perf and the peers rely on: a correct
// result (computed here by moving data between the ranks' buffers by hand) counts 0 wrong, a
// single corrupted element counts 1, a run that wrote nothing counts every element, and
// --inject-wrong's spoiled element counts 1 per rank with output. Covers all nine collectives, in
// and out of place, on 3 ranks.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "check.hpp"

namespace kolo::bench {
namespace {

constexpr int kRanks = 3;
constexpr int kRoot = 1;
constexpr size_t kBytes = 3 * 4 * 50;  // divides by the rank count, so no block is empty

struct RankBuffers {
  std::vector<float> send = std::vector<float>(kBytes / 4);
  std::vector<float> recv = std::vector<float>(kBytes / 4);
  Placement where;
};

class Simulated {
 public:
  Simulated(const CollectiveSpec& spec, bool in_place)
      : spec_(spec), shape_(spec.shape(kBytes / 4, kRanks)), in_place_(in_place), ranks_(kRanks) {
    for (int r = 0; r < kRanks; ++r) {
      RankBuffers& b = ranks_[static_cast<size_t>(r)];
      b.where = nccl_placement(spec, shape_, 4, r, kRoot, in_place, b.send.data(), b.recv.data());
    }
  }

  CheckContext context(int rank) const {
    return {&spec_, shape_, ElementType::float32, rank, kRanks, kRoot, in_place_};
  }

  void fill(const ValuePlan& plan) {
    for (int r = 0; r < kRanks; ++r) fill_inputs(context(r), ranks_[static_cast<size_t>(r)].where, plan);
  }

  // The collective, done by hand: every input is read before any output is written, since in
  // place they share memory.
  void run() {
    std::vector<std::vector<float>> in(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      const Placement& w = ranks_[static_cast<size_t>(r)].where;
      const auto* p = static_cast<const float*>(w.send);
      in[static_cast<size_t>(r)].assign(p, p + w.send_count);
    }
    const size_t block = shape_.param_count;
    for (int r = 0; r < kRanks; ++r) {
      auto* out = static_cast<float*>(ranks_[static_cast<size_t>(r)].where.recv);
      const size_t n = ranks_[static_cast<size_t>(r)].where.recv_count;
      for (size_t i = 0; i < n; ++i) {
        float v = 0;
        switch (spec_.id) {
          case CollId::allreduce:
            for (int q = 0; q < kRanks; ++q) v += in[static_cast<size_t>(q)][i];
            break;
          case CollId::reduce:
            if (r != kRoot) continue;  // the other ranks have no output
            for (int q = 0; q < kRanks; ++q) v += in[static_cast<size_t>(q)][i];
            break;
          case CollId::broadcast:
            v = in[kRoot][i];
            break;
          case CollId::allgather:
            v = in[i / block][i % block];
            break;
          case CollId::reducescatter:
            for (int q = 0; q < kRanks; ++q) v += in[static_cast<size_t>(q)][static_cast<size_t>(r) * block + i];
            break;
          case CollId::alltoall:
            v = in[i / block][static_cast<size_t>(r) * block + i % block];
            break;
          case CollId::gather:
            if (r != kRoot) continue;  // the other ranks have no output
            v = in[i / block][i % block];
            break;
          case CollId::scatter:
            v = in[kRoot][static_cast<size_t>(r) * block + i];
            break;
          case CollId::sendrecv:
            v = in[static_cast<size_t>((r + kRanks - 1) % kRanks)][i];
            break;
        }
        out[i] = v;
      }
    }
  }

  int64_t wrong(const ValuePlan& plan) const {
    int64_t total = 0;
    for (int r = 0; r < kRanks; ++r) total += count_wrong(context(r), ranks_[static_cast<size_t>(r)].where, plan, "test");
    return total;
  }

  // Elements the check looks at, over all ranks.
  size_t checked_elements() const {
    size_t total = 0;
    for (int r = 0; r < kRanks; ++r)
      if (!root_only() || r == kRoot) total += ranks_[static_cast<size_t>(r)].where.recv_count;
    return total;
  }

  bool root_only() const { return spec_.id == CollId::reduce || spec_.id == CollId::gather; }

  void spoil(int rank) { spoil_first_output(context(rank), ranks_[static_cast<size_t>(rank)].where); }
  bool has_output(int rank) const { return !root_only() || rank == kRoot; }
  size_t output_count(int rank) const { return ranks_[static_cast<size_t>(rank)].where.recv_count; }

  float* output_of(int rank) { return static_cast<float*>(ranks_[static_cast<size_t>(rank)].where.recv); }

 private:
  const CollectiveSpec& spec_;
  Shape shape_;
  bool in_place_;
  std::vector<RankBuffers> ranks_;
};

class HarnessCheck : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(HarnessCheck, CountsExactlyTheWrongElements) {
  const CollectiveSpec& spec = find_collective(std::get<0>(GetParam()));
  const bool in_place = std::get<1>(GetParam());
  const RedOp sum = RedOp::sum;
  const ValuePlan plan(ElementType::float32, spec.reduces ? &sum : nullptr, kRanks, 42);
  Simulated sim(spec, in_place);

  sim.fill(plan);
  if (!(spec.id == CollId::broadcast && in_place)) {
    // Nothing ran yet: outputs hold poison (or, in place, inputs), which must not pass. In-place
    // broadcast is the exception: the root's buffer already is its own correct result.
    EXPECT_GT(sim.wrong(plan), 0);
  }
  sim.run();
  EXPECT_EQ(sim.wrong(plan), 0);

  const int rank = sim.root_only() ? kRoot : 2;
  sim.output_of(rank)[1] += 1.0f;
  EXPECT_EQ(sim.wrong(plan), 1);

  // A fresh salt: the old (correct) results are now stale and must fail everywhere.
  const ValuePlan next(ElementType::float32, spec.reduces ? &sum : nullptr, kRanks, 43);
  sim.fill(next);
  sim.run();
  EXPECT_EQ(sim.wrong(next), 0);
  EXPECT_EQ(static_cast<size_t>(sim.wrong(plan)), sim.checked_elements());

  // --inject-wrong: spoiling every rank's first output element counts one per rank with output.
  for (int r = 0; r < kRanks; ++r) sim.spoil(r);
  size_t with_output = 0;
  for (int r = 0; r < kRanks; ++r) with_output += sim.has_output(r) && sim.output_count(r) > 0;
  EXPECT_EQ(static_cast<size_t>(sim.wrong(next)), with_output);
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, HarnessCheck,
                         ::testing::Combine(::testing::Values("allreduce", "broadcast", "reduce", "allgather",
                                                              "reducescatter", "alltoall", "gather", "scatter",
                                                              "sendrecv"),
                                            ::testing::Bool()));

TEST(HarnessCheckTiming, FillForTimingWritesSmallIntegersEverywhere) {
  const CollectiveSpec& spec = find_collective("allreduce");
  const Shape shape = spec.shape(100, 2);
  std::vector<float> send(100, -1.0f), recv(100);
  const Placement where = nccl_placement(spec, shape, 4, 1, 0, false, send.data(), recv.data());
  fill_for_timing({&spec, shape, ElementType::float32, 1, 2, 0, false}, where);
  for (size_t i = 0; i < send.size(); ++i) {
    ASSERT_GE(send[i], 0.0f);
    ASSERT_LT(send[i], 16.0f);
    ASSERT_EQ(send[i], static_cast<float>(static_cast<int>(send[i])));
  }
}

}  // namespace
}  // namespace kolo::bench

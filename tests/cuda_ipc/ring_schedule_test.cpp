// The ring all-reduce's schedule (transports/cuda_ipc/ring_schedule.hpp) without a GPU: P ranks
// run its steps under random interleavings that obey only the wait ipc_ring.cpp enforces (step
// g of rank r starts once r's step g - 1 and its left neighbour's step g - 1 have finished), each
// step reading everything when it starts and writing when it ends, so that a peer overwriting a
// chunk before its reader is done, or a read of a chunk not yet reduced, shows. Every element
// is a list of the ranks whose inputs were added into it, in the order they were: at the end
// every rank must hold, for each chunk c, the ranks c, c + 1, ..., c - 1 (each input once, in
// the ring's order, the same on every rank), out of place and in place, for counts around P
// (empty chunks) and larger. About 100 ms.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "transports/cuda_ipc/ring_schedule.hpp"

using namespace kolo::cuda_ipc;

namespace {

using Value = std::vector<int>;  // the ranks summed into an element, in order
using Buffer = std::vector<Value>;

// Runs one all-reduce of `count` elements over P ranks; returns each rank's output.
std::vector<Buffer> run_ring(int P, size_t count, bool in_place, std::mt19937& rng) {
  const RingChunks chunks(count, P, 4);  // float32's 16-byte width
  std::vector<Buffer> in(P, Buffer(count)), out_storage(P, Buffer(count));
  for (int r = 0; r < P; ++r)
    for (auto& v : in[r]) v = {r};
  std::vector<Buffer>& out = in_place ? in : out_storage;
  struct Pending {
    int step = -1;
    std::vector<std::pair<size_t, Value>> writes;
  };
  std::vector<int> done(P, -1);
  std::vector<Pending> running(P);
  const int steps = ring_steps(P);
  auto finished = [&] {
    for (int r = 0; r < P; ++r)
      if (done[r] < steps - 1) return false;
    return true;
  };
  while (!finished()) {
    std::vector<std::pair<bool, int>> can;  // (ends a running step, rank)
    for (int r = 0; r < P; ++r) {
      const int l = (r + P - 1) % P;
      if (running[r].step >= 0) {
        can.push_back({true, r});
      } else if (const int g = done[r] + 1; g < steps && (g == 0 || done[l] >= g - 1)) {
        can.push_back({false, r});
      }
    }
    const auto [ends, r] = can[std::uniform_int_distribution<size_t>(0, can.size() - 1)(rng)];
    const int l = (r + P - 1) % P;
    Pending& p = running[r];
    if (!ends) {
      p.step = done[r] + 1;
      const RingStep st = ring_step(r, P, p.step);
      for (size_t i = chunks.begin(st.chunk); i < chunks.begin(st.chunk) + chunks.size(st.chunk); ++i) {
        Value v = st.sum ? (st.left_input ? in[l][i] : out[l][i]) : out[l][i];
        if (st.sum) v.insert(v.end(), in[r][i].begin(), in[r][i].end());
        p.writes.push_back({i, v});
      }
    } else {
      for (auto& [i, v] : p.writes) out[r][i] = v;
      done[r] = p.step;
      p = Pending{};
    }
  }
  return out;
}

}  // namespace

TEST(RingSchedule, EveryRankHoldsEachChunkSummedOnceInTheRingsOrder) {
  std::mt19937 rng(44);
  for (int P = 2; P <= 8; ++P)
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{9}, size_t{33}, size_t{100}})
      for (bool in_place : {false, true})
        for (int trial = 0; trial < 20; ++trial) {
          const std::vector<Buffer> out = run_ring(P, count, in_place, rng);
          const RingChunks chunks(count, P, 4);
          for (int c = 0; c < P; ++c) {
            Value want;
            for (int k = 0; k < P; ++k) want.push_back((c + k) % P);
            for (int r = 0; r < P; ++r)
              for (size_t i = chunks.begin(c); i < chunks.begin(c) + chunks.size(c); ++i)
                ASSERT_EQ(out[r][i], want) << P << " ranks, count " << count << (in_place ? " in place" : "")
                                           << ", rank " << r << " element " << i << " (chunk " << c << ")";
          }
        }
}

TEST(RingSchedule, StepsAndChunks) {
  EXPECT_EQ(ring_steps(1), 0);
  EXPECT_EQ(ring_steps(4), 6);
  // Each rank reduces P - 1 chunks (every one but the chunk after its own) and receives P - 1.
  for (int P = 2; P <= 8; ++P)
    for (int r = 0; r < P; ++r) {
      std::vector<int> summed(P), copied(P);
      for (int g = 0; g < ring_steps(P); ++g) (ring_step(r, P, g).sum ? summed : copied)[ring_step(r, P, g).chunk]++;
      for (int c = 0; c < P; ++c) {
        EXPECT_EQ(summed[c], c == r ? 0 : 1) << P << " " << r << " " << c;
        EXPECT_EQ(copied[c], c == (r + 1) % P ? 0 : 1) << P << " " << r << " " << c;
      }
    }
  // Chunks start at multiples of the vector width and cover the count exactly.
  const RingChunks k(1000003, 3, 4);
  EXPECT_EQ(k.slice % 4, 0u);
  EXPECT_EQ(k.begin(0), 0u);
  EXPECT_EQ(k.begin(3), 1000003u);
  EXPECT_EQ(RingChunks(2, 4, 8).size(0), 2u);
  EXPECT_EQ(RingChunks(2, 4, 8).size(1), 0u);
}

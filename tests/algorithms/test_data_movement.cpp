// Every registered allgather, broadcast, gather, scatter, alltoall, alltoallv, barrier and
// send/recv algorithm: rank counts 1..8 and beyond, counts 0 .. a few thousand, every dtype,
// in-place and out-of-place, roots 0 and P-1. Data is a byte pattern of (source rank,
// element index, byte), so a misplaced, truncated or stale element is caught whatever the
// dtype.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "thread_comm.hpp"
#include "values.hpp"

namespace kolo::testing {
namespace {

using algo::CollArgs;
using algo::CollKind;
using algo::VarCounts;

struct Move {
  int nranks;
  size_t count;
  DataType dtype;
  bool in_place;
  int root = 0;
  size_t chunk_bytes = 8;
};

std::string label(const Move& m) {
  return std::to_string(m.nranks) + " ranks, count " + std::to_string(m.count) + ", " + dtype_name(m.dtype) +
         (m.in_place ? ", in-place" : ", out-of-place") + ", root " + std::to_string(m.root) + ", chunk " +
         std::to_string(m.chunk_bytes) + " bytes: ";
}

CollArgs args_of(CollKind kind, const Move& m) {
  CollArgs a;
  a.kind = kind;
  a.dtype = m.dtype;
  a.count = m.count;
  a.root = m.root;
  return a;
}

// A rank's input kept aside to prove an out-of-place call left it alone.
struct Input {
  GuardedBuffer buf;
  std::vector<unsigned char> before;
  Input() = default;
  Input(size_t elems, size_t es, int src) : buf(elems * es) {
    fill_pattern(buf.data(), elems, es, src);
    before.assign(buf.data(), buf.data() + buf.bytes());
  }
  bool unchanged() const { return buf.guards_intact() && same_bytes(buf.data(), before.data(), before.size()); }
};

std::string run_allgather(const algo::Algorithm& algo, const Move& m) {
  const size_t es = dtype_size(m.dtype), P = static_cast<size_t>(m.nranks), n = m.count;
  std::vector<Input> in(P);
  std::vector<GuardedBuffer> out;
  std::vector<CollArgs> args;
  for (int r = 0; r < m.nranks; ++r) {
    GuardedBuffer& recv = out.emplace_back(P * n * es);
    CollArgs a = args_of(CollKind::allgather, m);
    a.recv = recv.data();
    if (m.in_place) {
      fill_pattern(recv.data() + r * n * es, n, es, r);
      a.send = recv.data() + r * n * es;
    } else {
      in[r] = Input(n, es, r);
      a.send = in[r].buf.data();
    }
    args.push_back(a);
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = m.chunk_bytes}); !err.empty()) return label(m) + err;
  for (int r = 0; r < m.nranks; ++r) {
    if (!out[r].guards_intact() || (!m.in_place && !in[r].unchanged()))
      return label(m) + "rank " + std::to_string(r) + " wrote outside its output";
    for (int j = 0; j < m.nranks; ++j)
      if (std::string e = check_pattern(out[r].data() + j * n * es, n, es, j); !e.empty())
        return label(m) + "rank " + std::to_string(r) + " block " + std::to_string(j) + ": " + e;
  }
  return "";
}

// In-place: one buffer per rank in both fields (what ProcessGroup::broadcast passes).
// Out-of-place: the root reads a separate send buffer; other ranks have no send buffer.
std::string run_broadcast(const algo::Algorithm& algo, const Move& m) {
  const size_t es = dtype_size(m.dtype), n = m.count;
  Input root_input(n, es, m.root);
  std::vector<GuardedBuffer> out;
  std::vector<CollArgs> args;
  for (int r = 0; r < m.nranks; ++r) {
    GuardedBuffer& buf = out.emplace_back(n * es);
    CollArgs a = args_of(CollKind::broadcast, m);
    a.recv = buf.data();
    if (m.in_place) {
      if (r == m.root) fill_pattern(buf.data(), n, es, r);
      a.send = buf.data();
    } else {
      a.send = r == m.root ? root_input.buf.data() : nullptr;
    }
    args.push_back(a);
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = m.chunk_bytes}); !err.empty()) return label(m) + err;
  if (!root_input.unchanged()) return label(m) + "the root's send buffer changed";
  for (int r = 0; r < m.nranks; ++r) {
    if (!out[r].guards_intact()) return label(m) + "rank " + std::to_string(r) + " wrote outside its buffer";
    if (std::string e = check_pattern(out[r].data(), n, es, m.root); !e.empty())
      return label(m) + "rank " + std::to_string(r) + ": " + e;
  }
  return "";
}

std::string run_gather(const algo::Algorithm& algo, const Move& m) {
  const size_t es = dtype_size(m.dtype), P = static_cast<size_t>(m.nranks), n = m.count;
  std::vector<Input> in(P);
  GuardedBuffer out(P * n * es);
  std::vector<CollArgs> args;
  for (int r = 0; r < m.nranks; ++r) {
    CollArgs a = args_of(CollKind::gather, m);
    if (r == m.root) a.recv = out.data();  // the other ranks have no receive buffer
    if (r == m.root && m.in_place) {
      fill_pattern(out.data() + r * n * es, n, es, r);
      a.send = out.data() + r * n * es;
    } else {
      in[r] = Input(n, es, r);
      a.send = in[r].buf.data();
    }
    args.push_back(a);
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = m.chunk_bytes}); !err.empty()) return label(m) + err;
  if (!out.guards_intact()) return label(m) + "the root wrote outside its buffer";
  for (int r = 0; r < m.nranks; ++r)
    if (!(r == m.root && m.in_place) && !in[r].unchanged())
      return label(m) + "rank " + std::to_string(r) + "'s send buffer changed";
  for (int j = 0; j < m.nranks; ++j)
    if (std::string e = check_pattern(out.data() + j * n * es, n, es, j); !e.empty())
      return label(m) + "block " + std::to_string(j) + ": " + e;
  return "";
}

std::string run_scatter(const algo::Algorithm& algo, const Move& m) {
  const size_t es = dtype_size(m.dtype), P = static_cast<size_t>(m.nranks), n = m.count;
  Input root_input(P * n, es, m.root);
  std::vector<GuardedBuffer> out;
  std::vector<CollArgs> args;
  for (int r = 0; r < m.nranks; ++r) {
    GuardedBuffer& recv = out.emplace_back(r == m.root && m.in_place ? 0 : n * es);
    CollArgs a = args_of(CollKind::scatter, m);
    a.send = r == m.root ? root_input.buf.data() : nullptr;  // the other ranks have no send buffer
    a.recv = r == m.root && m.in_place ? root_input.buf.data() + r * n * es : recv.data();
    args.push_back(a);
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = m.chunk_bytes}); !err.empty()) return label(m) + err;
  if (!root_input.unchanged()) return label(m) + "the root's send buffer changed";
  for (int r = 0; r < m.nranks; ++r) {
    if (!out[r].guards_intact()) return label(m) + "rank " + std::to_string(r) + " wrote outside its buffer";
    if (std::string e = check_pattern(args[r].recv, n, es, m.root, r * n); !e.empty())
      return label(m) + "rank " + std::to_string(r) + ": " + e;
  }
  return "";
}

std::string run_alltoall(const algo::Algorithm& algo, const Move& m) {
  const size_t es = dtype_size(m.dtype), P = static_cast<size_t>(m.nranks), n = m.count;
  std::vector<Input> in;
  std::vector<GuardedBuffer> out;
  std::vector<CollArgs> args;
  for (int r = 0; r < m.nranks; ++r) {
    in.emplace_back(P * n, es, r);
    out.emplace_back(m.in_place ? 0 : P * n * es);
    CollArgs a = args_of(CollKind::alltoall, m);
    a.send = in[r].buf.data();
    a.recv = m.in_place ? in[r].buf.data() : out[r].data();
    args.push_back(a);
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = m.chunk_bytes}); !err.empty()) return label(m) + err;
  for (int r = 0; r < m.nranks; ++r) {
    if (!out[r].guards_intact() || !in[r].buf.guards_intact() || (!m.in_place && !in[r].unchanged()))
      return label(m) + "rank " + std::to_string(r) + " wrote outside its output";
    for (int s = 0; s < m.nranks; ++s)
      if (std::string e = check_pattern(static_cast<const unsigned char*>(args[r].recv) + s * n * es, n, es, s, r * n);
          !e.empty())
        return label(m) + "rank " + std::to_string(r) + " block from rank " + std::to_string(s) + ": " + e;
  }
  return "";
}

using MoveRunner = std::string (*)(const algo::Algorithm&, const Move&);

const std::vector<DataType> kElementSizes = {DataType::int8, DataType::float16, DataType::float32, DataType::float64};

void sweep_shapes(CollKind kind, MoveRunner run, const std::string& name, int nranks, bool rooted) {
  const algo::Algorithm& algo = algorithm(kind, name);
  std::vector<int> roots = rooted && nranks > 1 ? std::vector<int>{0, nranks - 1} : std::vector<int>{0};
  for (int root : roots)
    for (bool in_place : {false, true}) {
      for (size_t count : small_counts(nranks))
        for (DataType t : kElementSizes) EXPECT_EQ(run(algo, {nranks, count, t, in_place, root}), "");
      EXPECT_EQ(run(algo, {nranks, 3 * static_cast<size_t>(nranks) + 1, DataType::float64, in_place, root, 3}), "");
      EXPECT_EQ(run(algo, {nranks, 2999, DataType::float32, in_place, root, 512}), "");
    }
}

void sweep_dtypes(CollKind kind, MoveRunner run, const std::string& name, int nranks) {
  const algo::Algorithm& algo = algorithm(kind, name);
  int variant = 0;
  for (DataType t : all_dtypes())
    for (bool in_place : {false, true}) {
      const int root = variant++ % 2 == 0 ? 0 : nranks - 1;
      EXPECT_EQ(run(algo, {nranks, 3 * static_cast<size_t>(nranks) + 1, t, in_place, root}), "");
    }
}

#define MOVEMENT_SUITE(Suite, kind, runner, rooted)                                                       \
  class Suite : public ::testing::TestWithParam<AlgoRanks> {};                                           \
  TEST_P(Suite, Shapes) { sweep_shapes(kind, runner, std::get<0>(GetParam()), std::get<1>(GetParam()), rooted); } \
  TEST_P(Suite, EveryDtype) { sweep_dtypes(kind, runner, std::get<0>(GetParam()), std::get<1>(GetParam())); }     \
  INSTANTIATE_TEST_SUITE_P(Registered, Suite,                                                             \
                           ::testing::ValuesIn(algo_rank_params(kind)), \
                           algo_ranks_name)

MOVEMENT_SUITE(AllgatherAlgorithms, CollKind::allgather, run_allgather, false);
MOVEMENT_SUITE(BroadcastAlgorithms, CollKind::broadcast, run_broadcast, true);
MOVEMENT_SUITE(GatherAlgorithms, CollKind::gather, run_gather, true);
MOVEMENT_SUITE(ScatterAlgorithms, CollKind::scatter, run_scatter, true);
MOVEMENT_SUITE(AlltoallAlgorithms, CollKind::alltoall, run_alltoall, false);

// alltoallv: uneven counts (some zero), blocks laid out in reverse order with gaps on the send
// side and in order with wider gaps on the receive side, so displacements are really used.
// In-place (one buffer for both) is refused by ProcessGroup, but the algorithm copes anyway.
std::string run_alltoallv(const algo::Algorithm& algo, int nranks, size_t scale, DataType t, bool in_place) {
  const size_t es = dtype_size(t), P = static_cast<size_t>(nranks);
  auto count = [&](size_t s, size_t d) { return (s * 3 + d * 5 + scale) % 4 + scale / 3; };
  const std::string what = std::to_string(nranks) + " ranks, scale " + std::to_string(scale) + ", " + dtype_name(t) +
                           (in_place ? ", in-place: " : ": ");
  std::vector<CollArgs> args(P);
  std::vector<VarCounts> counts(P);  // args[r].v points here
  std::vector<GuardedBuffer> send(P), recv(P);
  std::vector<std::vector<unsigned char>> before(P);
  for (size_t r = 0; r < P; ++r) {
    CollArgs& a = args[r];
    a.kind = CollKind::alltoallv;
    a.dtype = t;
    VarCounts& v = counts[r];
    a.v = &v;
    v.send_counts.resize(P);
    v.send_displs.resize(P);
    v.recv_counts.resize(P);
    v.recv_displs.resize(P);
    size_t send_end = 0, recv_end = 0;
    for (size_t d = P; d-- > 0;) {
      v.send_counts[d] = count(r, d);
      v.send_displs[d] = send_end;
      send_end += count(r, d) + 1;
    }
    for (size_t s = 0; s < P; ++s) {
      v.recv_counts[s] = count(s, r);
      v.recv_displs[s] = recv_end;
      recv_end += count(s, r) + 2;
    }
    send[r] = GuardedBuffer((in_place ? std::max(send_end, recv_end) : send_end) * es);
    recv[r] = GuardedBuffer(in_place ? 0 : recv_end * es);
    for (size_t d = 0; d < P; ++d)
      fill_pattern(send[r].data() + v.send_displs[d] * es, v.send_counts[d], es, static_cast<int>(r), d * 100000);
    before[r].assign(send[r].data(), send[r].data() + send[r].bytes());
    a.send = send[r].data();
    a.recv = in_place ? send[r].data() : recv[r].data();
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = 8}); !err.empty()) return what + err;
  for (size_t r = 0; r < P; ++r) {
    if (!send[r].guards_intact() || !recv[r].guards_intact()) return what + "rank " + std::to_string(r) + " wrote outside its buffers";
    if (!in_place && !same_bytes(send[r].data(), before[r].data(), before[r].size()))
      return what + "rank " + std::to_string(r) + "'s send buffer changed";
    const auto* out = static_cast<const unsigned char*>(args[r].recv);
    for (size_t s = 0; s < P; ++s) {
      if (std::string e = check_pattern(out + args[r].v->recv_displs[s] * es, args[r].v->recv_counts[s], es, static_cast<int>(s), r * 100000);
          !e.empty())
        return what + "rank " + std::to_string(r) + " block from rank " + std::to_string(s) + ": " + e;
      // The gap after each block is not the receiver's to write.
      if (!in_place)
        for (size_t g = 0; g < 2 * es; ++g)
          if (out[(args[r].v->recv_displs[s] + args[r].v->recv_counts[s]) * es + g] != 0xEE)
            return what + "rank " + std::to_string(r) + " wrote into the gap after the block from rank " + std::to_string(s);
    }
  }
  return "";
}

class AlltoallvAlgorithms : public ::testing::TestWithParam<AlgoRanks> {};
TEST_P(AlltoallvAlgorithms, UnevenCountsAndDisplacements) {
  auto [name, nranks] = GetParam();
  const algo::Algorithm& algo = algorithm(CollKind::alltoallv, name);
  for (size_t scale : {0, 1, 2, 5, 40})
    for (DataType t : {DataType::int8, DataType::bfloat16, DataType::float64, DataType::uint32})
      for (bool in_place : {false, true}) EXPECT_EQ(run_alltoallv(algo, nranks, scale, t, in_place), "");
}
INSTANTIATE_TEST_SUITE_P(Registered, AlltoallvAlgorithms,
                         ::testing::ValuesIn(algo_rank_params(CollKind::alltoallv)),
                         algo_ranks_name);

// Ranks arrive at staggered times; none may leave before the last one has arrived.
class BarrierAlgorithms : public ::testing::TestWithParam<AlgoRanks> {};
TEST_P(BarrierAlgorithms, NobodyLeavesBeforeEverybodyArrived) {
  auto [name, nranks] = GetParam();
  const algo::Algorithm& algo = algorithm(CollKind::barrier, name);
  ThreadWorld world(nranks);
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> arrived{0}, early{0};
    const std::string err = world.run("barrier " + name, [&](int r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(((r + round) % nranks) * 2));
      arrived.fetch_add(1);
      CollArgs a;
      a.kind = CollKind::barrier;
      auto comm = world.make_comm(r, a);
      algo.run(*comm);
      if (arrived.load() != nranks) early.fetch_add(1);
    });
    ASSERT_EQ(err, "");
    EXPECT_EQ(early.load(), 0) << "round " << round << ": ranks left the barrier before all had arrived";
  }
}
INSTANTIATE_TEST_SUITE_P(Registered, BarrierAlgorithms,
                         ::testing::ValuesIn(algo_rank_params(CollKind::barrier)),
                         algo_ranks_name);

// Ranks 2k and 2k+1 exchange messages in both directions, several in a row, each call with
// its own Comm as the engine does; messages match in order.
class SendRecvAlgorithms : public ::testing::TestWithParam<AlgoRanks> {};
TEST_P(SendRecvAlgorithms, PairsExchangeInOrder) {
  auto [name, nranks] = GetParam();
  if (nranks < 2) GTEST_SKIP() << "point-to-point needs a peer";
  const algo::Algorithm& send = algorithm(CollKind::send, name);
  const algo::Algorithm& recv = algorithm(CollKind::recv, name);
  for (DataType t : {DataType::int8, DataType::float16, DataType::float64}) {
    const size_t es = dtype_size(t);
    const std::vector<size_t> counts = {0, 5, 1000};
    ThreadWorld world(nranks);
    std::vector<std::vector<GuardedBuffer>> got(static_cast<size_t>(nranks));
    const std::string err = world.run("send/recv " + name, [&](int r) {
      const int peer = r % 2 == 0 ? r + 1 : r - 1;
      if (peer >= nranks) return;  // odd one out
      for (size_t m = 0; m < counts.size(); ++m) {
        // Even ranks send first and receive second; odd ranks the other way round.
        for (int phase = 0; phase < 2; ++phase) {
          const bool sending = (phase == 0) == (r % 2 == 0);
          CollArgs a;
          a.kind = sending ? CollKind::send : CollKind::recv;
          a.dtype = t;
          a.count = counts[m];
          a.root = peer;
          a.tag = static_cast<uint32_t>(m);
          GuardedBuffer buf(counts[m] * es);
          if (sending) {
            fill_pattern(buf.data(), counts[m], es, r, m * 7);
            a.send = buf.data();
          } else {
            a.recv = buf.data();
          }
          auto comm = world.make_comm(r, a);
          (sending ? send : recv).run(*comm);
          if (!sending) got[static_cast<size_t>(r)].push_back(std::move(buf));
        }
      }
    });
    ASSERT_EQ(err, "") << dtype_name(t);
    for (int r = 0; r < nranks; ++r) {
      const int peer = r % 2 == 0 ? r + 1 : r - 1;
      if (peer >= nranks) continue;
      ASSERT_EQ(got[r].size(), counts.size()) << "rank " << r;
      for (size_t m = 0; m < counts.size(); ++m) {
        EXPECT_TRUE(got[r][m].guards_intact());
        EXPECT_EQ(check_pattern(got[r][m].data(), counts[m], es, peer, m * 7), "") << "rank " << r << " message " << m;
      }
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Registered, SendRecvAlgorithms,
                         ::testing::ValuesIn(algo_rank_params(CollKind::send)),
                         algo_ranks_name);

// Every collective has at least one algorithm, and every recv algorithm has its send twin, except
// recv "any" (a receive from any source), which takes what a send "direct" sends.
TEST(Registry, EveryCollectiveHasAnAlgorithm) {
  for (int k = 0; k < algo::kNumCollKinds; ++k)
    EXPECT_FALSE(names_of(static_cast<CollKind>(k)).empty()) << algo::coll_name(static_cast<CollKind>(k));
  for (const std::string& name : names_of(CollKind::recv)) {
    if (name != "any") EXPECT_NE(algo::find_algorithm(CollKind::send, name), nullptr) << name;
  }
  ASSERT_NE(algo::find_algorithm(CollKind::recv, "any"), nullptr);
  EXPECT_NE(algo::find_algorithm(CollKind::send, "direct"), nullptr);
  for (const algo::Algorithm* a : algo::all_algorithms())
    for (int k = 0; k < algo::kNumCollKinds; ++k)
      if (a->serves.has(static_cast<CollKind>(k)))
        EXPECT_EQ(algo::find_algorithm(static_cast<CollKind>(k), a->name), a)
            << "duplicate " << algo::coll_name(static_cast<CollKind>(k)) << " " << a->name;
}

}  // namespace
}  // namespace kolo::testing

// Every registered allreduce, reduce_scatter and reduce algorithm against an independent
// reference: rank counts 1..8 and beyond, counts 0 .. a few thousand (not divisible by the
// ranks, fewer than the ranks), every dtype x op, in-place and out-of-place, roots 0 and P-1,
// with chunks of a few bytes so the pipelined paths run on small data.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "thread_comm.hpp"
#include "values.hpp"

namespace kolo::testing {
namespace {

using algo::CollArgs;
using algo::CollKind;

struct Shape {
  int nranks;
  size_t count;
  DataType dtype;
  ReduceOp op;
  bool in_place;
  int root = 0;
  size_t chunk_bytes = 8;
};

std::string label(const Shape& s) {
  return std::to_string(s.nranks) + " ranks, count " + std::to_string(s.count) + ", " + dtype_name(s.dtype) + ", " +
         describe(s.op) + (s.in_place ? ", in-place" : ", out-of-place") + ", root " + std::to_string(s.root) +
         ", chunk " + std::to_string(s.chunk_bytes) + " bytes: ";
}

// Per-rank buffers of one run, with the send contents kept to check they were not written.
struct Buffers {
  std::vector<GuardedBuffer> send, recv;
  std::vector<std::vector<unsigned char>> send_before;
};

std::string check_common(const Buffers& b, bool in_place) {
  for (size_t r = 0; r < b.send.size(); ++r) {
    if (!b.send[r].guards_intact() || !b.recv[r].guards_intact())
      return "rank " + std::to_string(r) + " wrote outside its buffers";
    if (!in_place && !same_bytes(b.send[r].data(), b.send_before[r].data(), b.send[r].bytes()))
      return "rank " + std::to_string(r) + "'s send buffer changed in an out-of-place call";
  }
  return "";
}

// Fills send buffers of `elems` elements with each rank's inputs.
Buffers make_inputs(const Shape& s, size_t elems) {
  Buffers b;
  const size_t es = dtype_size(s.dtype);
  for (int r = 0; r < s.nranks; ++r) {
    GuardedBuffer& buf = b.send.emplace_back(elems * es);
    for (size_t i = 0; i < elems; ++i) store_input(s.op, s.dtype, buf.data(), i, s.nranks, r, i);
    b.send_before.emplace_back(buf.data(), buf.data() + buf.bytes());
  }
  return b;
}

CollArgs base_args(CollKind kind, const Shape& s) {
  CollArgs a;
  a.kind = kind;
  a.dtype = s.dtype;
  a.op = s.op;
  a.count = s.count;
  a.root = s.root;
  return a;
}

std::string run_allreduce(const algo::Algorithm& algo, const Shape& s) {
  const size_t es = dtype_size(s.dtype);
  Buffers b = make_inputs(s, s.count);
  std::vector<CollArgs> args;
  for (int r = 0; r < s.nranks; ++r) {
    b.recv.emplace_back(s.in_place ? 0 : s.count * es);
    CollArgs a = base_args(CollKind::allreduce, s);
    a.send = b.send[r].data();
    a.recv = s.in_place ? b.send[r].data() : b.recv[r].data();
    args.push_back(a);
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = s.chunk_bytes}); !err.empty()) return label(s) + err;
  for (int r = 0; r < s.nranks; ++r)
    for (size_t i = 0; i < s.count; ++i)
      if (std::string e = check_reduced(s.op, s.dtype, s.nranks, args[r].recv, i, i); !e.empty())
        return label(s) + "rank " + std::to_string(r) + " " + e;
  if (std::string e = check_common(b, s.in_place); !e.empty()) return label(s) + e;
  return "";
}

std::string run_reduce_scatter(const algo::Algorithm& algo, const Shape& s) {
  const size_t es = dtype_size(s.dtype), P = static_cast<size_t>(s.nranks);
  Buffers b = make_inputs(s, s.count * P);
  std::vector<CollArgs> args;
  for (int r = 0; r < s.nranks; ++r) {
    b.recv.emplace_back(s.in_place ? 0 : s.count * es);
    CollArgs a = base_args(CollKind::reduce_scatter, s);
    a.send = b.send[r].data();
    a.recv = s.in_place ? b.send[r].data() + static_cast<size_t>(r) * s.count * es : b.recv[r].data();
    args.push_back(a);
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = s.chunk_bytes}); !err.empty()) return label(s) + err;
  for (int r = 0; r < s.nranks; ++r)
    for (size_t i = 0; i < s.count; ++i)
      if (std::string e = check_reduced(s.op, s.dtype, s.nranks, args[r].recv, i, static_cast<size_t>(r) * s.count + i);
          !e.empty())
        return label(s) + "rank " + std::to_string(r) + " " + e;
  if (std::string e = check_common(b, s.in_place); !e.empty()) return label(s) + e;
  return "";
}

std::string run_reduce(const algo::Algorithm& algo, const Shape& s) {
  const size_t es = dtype_size(s.dtype);
  Buffers b = make_inputs(s, s.count);
  std::vector<CollArgs> args;
  for (int r = 0; r < s.nranks; ++r) {
    const bool root = r == s.root;
    b.recv.emplace_back(root && !s.in_place ? s.count * es : 0);
    CollArgs a = base_args(CollKind::reduce, s);
    a.send = b.send[r].data();
    a.recv = !root ? nullptr : s.in_place ? b.send[r].data() : b.recv[r].data();  // non-roots have no recv
    args.push_back(a);
  }
  if (std::string err = run_algorithm(algo, args, {.chunk_bytes = s.chunk_bytes}); !err.empty()) return label(s) + err;
  for (size_t i = 0; i < s.count; ++i)
    if (std::string e = check_reduced(s.op, s.dtype, s.nranks, args[s.root].recv, i, i); !e.empty())
      return label(s) + "root " + e;
  // Non-root inputs must survive even in-place (only the root's buffer is an output).
  for (int r = 0; r < s.nranks; ++r)
    if (r != s.root && !same_bytes(b.send[r].data(), b.send_before[r].data(), b.send[r].bytes()))
      return label(s) + "non-root rank " + std::to_string(r) + "'s send buffer changed";
  if (std::string e = check_common(b, s.in_place); !e.empty()) return label(s) + e;
  return "";
}

using Runner = std::string (*)(const algo::Algorithm&, const Shape&);

struct Combo {
  DataType dtype;
  ReduceOp op;
};
// A spread of element sizes and of ops with and without a finalize step.
const std::vector<Combo> kShapeCombos = {
    {DataType::float32, ReduceKind::sum},  {DataType::int32, ReduceKind::avg},   {DataType::float16, ReduceOp::premul_sum(0.5)},
    {DataType::int8, ReduceKind::max},     {DataType::float64, ReduceKind::prod}, {DataType::uint8, ReduceKind::bxor},
    {DataType::bfloat16, ReduceKind::min},
};
const std::vector<Combo> kLargeCombos = {
    {DataType::float32, ReduceKind::sum}, {DataType::int64, ReduceKind::avg}, {DataType::float16, ReduceOp::premul_sum(0.5)}};

// Shapes x in/out-of-place (x roots for rooted collectives) for one algorithm and rank count.
void sweep_shapes(CollKind kind, Runner run, const std::string& name, int nranks, bool rooted) {
  const algo::Algorithm& algo = algorithm(kind, name);
  std::vector<int> roots = rooted && nranks > 1 ? std::vector<int>{0, nranks - 1} : std::vector<int>{0};
  for (int root : roots)
    for (bool in_place : {false, true}) {
      for (size_t count : small_counts(nranks))
        for (const Combo& c : kShapeCombos) EXPECT_EQ(run(algo, {nranks, count, c.dtype, c.op, in_place, root}), "");
      // A chunk smaller than most elements: one element per chunk.
      EXPECT_EQ(run(algo, {nranks, 3 * static_cast<size_t>(nranks) + 1, DataType::float64, ReduceKind::sum, in_place, root, 3}), "");
      for (const Combo& c : kLargeCombos)
        EXPECT_EQ(run(algo, {nranks, 2999, c.dtype, c.op, in_place, root, 512}), "");
    }
}

void sweep_dtypes_and_ops(CollKind kind, Runner run, const std::string& name, int nranks) {
  const algo::Algorithm& algo = algorithm(kind, name);
  const size_t count = 3 * static_cast<size_t>(nranks) + 1;
  int variant = 0;
  for (DataType t : all_dtypes())
    for (const ReduceOp& op : ops_for(t))
      for (bool in_place : {false, true}) {
        const int root = (variant++ % 2 == 0) ? 0 : nranks - 1;
        EXPECT_EQ(run(algo, {nranks, count, t, op, in_place, root}), "");
      }
}

class AllreduceAlgorithms : public ::testing::TestWithParam<AlgoRanks> {};
class ReduceScatterAlgorithms : public ::testing::TestWithParam<AlgoRanks> {};
class ReduceAlgorithms : public ::testing::TestWithParam<AlgoRanks> {};

TEST_P(AllreduceAlgorithms, ShapesInPlaceAndOutOfPlace) {
  auto [name, nranks] = GetParam();
  sweep_shapes(CollKind::allreduce, run_allreduce, name, nranks, false);
}
TEST_P(AllreduceAlgorithms, EveryDtypeAndOp) {
  auto [name, nranks] = GetParam();
  sweep_dtypes_and_ops(CollKind::allreduce, run_allreduce, name, nranks);
}

// Random floating-point inputs (where the order of additions changes the rounding): every
// rank must end with exactly the same bits, close to the exact sum.
TEST_P(AllreduceAlgorithms, RanksAgreeBitForBitOnRandomFloats) {
  auto [name, nranks] = GetParam();
  const algo::Algorithm& algo = algorithm(CollKind::allreduce, name);
  std::mt19937_64 rng(1234 + static_cast<unsigned>(nranks));
  for (DataType t : {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16})
    for (ReduceOp op : {ReduceOp(ReduceKind::sum), ReduceOp(ReduceKind::avg)})
      for (size_t count : {size_t{37}, size_t{1500}}) {
        const size_t es = dtype_size(t);
        std::vector<std::vector<unsigned char>> send(nranks), recv(nranks);
        std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
        std::vector<CollArgs> args;
        for (int r = 0; r < nranks; ++r) {
          send[r].resize(count * es);
          recv[r].resize(count * es);
          for (size_t i = 0; i < count; ++i) {
            // Random signs, mantissas and a few binades of exponent, finite in every type.
            uint64_t bits;
            if (t == DataType::float16) bits = (rng() & 0x83FF) | ((10 + rng() % 10) << 10);
            else if (t == DataType::bfloat16) bits = (rng() & 0x807F) | ((120 + rng() % 10) << 7);
            else if (t == DataType::float32) bits = std::bit_cast<uint32_t>(std::ldexp(static_cast<float>(rng() % 100000) - 50000.f, -int(rng() % 20)));
            else bits = std::bit_cast<uint64_t>(std::ldexp(static_cast<double>(rng() % 100000000) - 5e7, -int(rng() % 30)));
            std::memcpy(send[r].data() + i * es, &bits, es);
            exact[i] += load_value(t, send[r].data(), i);
            magnitude[i] += std::fabs(load_value(t, send[r].data(), i));
          }
          CollArgs a;
          a.kind = CollKind::allreduce;
          a.dtype = t;
          a.op = op;
          a.count = count;
          a.send = send[r].data();
          a.recv = recv[r].data();
          args.push_back(a);
        }
        const std::string what = std::string(dtype_name(t)) + " " + describe(op) + " count " + std::to_string(count);
        ASSERT_EQ(run_algorithm(algo, args, {.chunk_bytes = 64}), "") << what;
        for (int r = 1; r < nranks; ++r)
          ASSERT_EQ(std::memcmp(recv[0].data(), recv[r].data(), count * es), 0) << what << ": rank " << r << " differs from rank 0";
        // Rounding: each of the P-1 additions and the final conversion is off by at most one
        // half-unit of the type relative to the running magnitude.
        const int mant = t == DataType::float16 ? 10 : t == DataType::bfloat16 ? 7 : t == DataType::float32 ? 23 : 52;
        for (size_t i = 0; i < count; ++i) {
          const double divisor = op.kind == ReduceKind::avg ? nranks : 1;
          const double tol = std::ldexp(magnitude[i] / divisor, -mant) * (nranks + 1);
          ASSERT_NEAR(load_value(t, recv[0].data(), i), exact[i] / divisor, tol) << what << " element " << i;
        }
      }
}

TEST_P(ReduceScatterAlgorithms, ShapesInPlaceAndOutOfPlace) {
  auto [name, nranks] = GetParam();
  sweep_shapes(CollKind::reduce_scatter, run_reduce_scatter, name, nranks, false);
}
TEST_P(ReduceScatterAlgorithms, EveryDtypeAndOp) {
  auto [name, nranks] = GetParam();
  sweep_dtypes_and_ops(CollKind::reduce_scatter, run_reduce_scatter, name, nranks);
}

TEST_P(ReduceAlgorithms, ShapesInPlaceAndOutOfPlaceBothRoots) {
  auto [name, nranks] = GetParam();
  sweep_shapes(CollKind::reduce, run_reduce, name, nranks, true);
}
TEST_P(ReduceAlgorithms, EveryDtypeAndOp) {
  auto [name, nranks] = GetParam();
  sweep_dtypes_and_ops(CollKind::reduce, run_reduce, name, nranks);
}

INSTANTIATE_TEST_SUITE_P(Registered, AllreduceAlgorithms,
                         ::testing::ValuesIn(algo_rank_params(CollKind::allreduce)),
                         algo_ranks_name);
INSTANTIATE_TEST_SUITE_P(Registered, ReduceScatterAlgorithms,
                         ::testing::ValuesIn(algo_rank_params(CollKind::reduce_scatter)),
                         algo_ranks_name);
INSTANTIATE_TEST_SUITE_P(Registered, ReduceAlgorithms,
                         ::testing::ValuesIn(algo_rank_params(CollKind::reduce)),
                         algo_ranks_name);

}  // namespace
}  // namespace kolo::testing

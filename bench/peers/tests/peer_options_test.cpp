// The peers' command line: nccl-tests' flags and defaults, and refusals with clear messages.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collective_specs.hpp"
#include "peer_options.hpp"

namespace kolo::peers {
namespace {

using bench::CollectiveSpec;
using bench::ElementType;
using bench::find_collective;
using bench::RedOp;
using bench::Shape;

const ProgramTraits kMpi{"mpi-like", {"allreduce", "broadcast", "reducescatter"}, {}, false, false};
const ProgramTraits kGloo{"gloo-like", {"allreduce"}, {"ring", "halving_doubling"}, true, true};

PeerOptions parse(const ProgramTraits& traits, std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("prog")};
  for (std::string& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data(), traits);
}

TEST(PeerOptions, NcclTestsFlags) {
  const PeerOptions o = parse(kMpi, {"allreduce", "-b", "8", "-e", "16M", "-f", "4", "-n", "7", "-w", "0", "-c", "0",
                                     "-d", "double", "-o", "max", "-r", "1", "-a", "3"});
  EXPECT_EQ(o.collective, "allreduce");
  EXPECT_EQ(o.min_bytes, 8u);
  EXPECT_EQ(o.max_bytes, 16u << 20);
  EXPECT_EQ(o.step_factor, 4u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup_iters, 0);
  EXPECT_FALSE(o.check);
  ASSERT_EQ(o.dtypes.size(), 1u);
  EXPECT_EQ(o.dtypes[0], ElementType::float64);
  ASSERT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.ops[0], RedOp::max);
  EXPECT_EQ(o.root, 1);
  EXPECT_EQ(o.combine, TimeCombine::maximum);
}

TEST(PeerOptions, DefaultsAreNcclTests) {
  const PeerOptions o = parse(kMpi, {"all_reduce"});
  EXPECT_EQ(o.collective, "allreduce");
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup_iters, 1);
  EXPECT_TRUE(o.check);
  EXPECT_EQ(o.dtypes, std::vector<ElementType>{ElementType::float32});
  EXPECT_EQ(o.combine, TimeCombine::average);
}

TEST(PeerOptions, LongFormsAndAll) {
  const PeerOptions o = parse(kGloo, {"--minbytes=1K", "--maxbytes", "2K", "allreduce", "--algo", "halving_doubling",
                                      "-d", "all", "-o", "all", "-T", "2.5", "--store-dir", "/tmp/x"});
  EXPECT_EQ(o.min_bytes, 1024u);
  EXPECT_EQ(o.max_bytes, 2048u);
  EXPECT_EQ(o.algorithm, "halving_doubling");
  EXPECT_EQ(o.dtypes.size(), 8u);
  EXPECT_EQ(o.ops.size(), 4u);
  EXPECT_EQ(o.timeout.count(), 2500);
  EXPECT_EQ(o.store_dir, "/tmp/x");
  EXPECT_EQ(parse(kGloo, {"allreduce"}).algorithm, "ring");  // the first listed is the default
}

TEST(PeerOptions, FlagsThePeersDoNotVaryAreNoted) {
  const PeerOptions o = parse(kMpi, {"allreduce", "-I", "1", "-m", "2"});
  EXPECT_FALSE(o.per_iter_timing);  // the peers' rows have no i_* columns, so neither may the header
  // What the harness leaves out for the peers, and what it does before their timing.
  EXPECT_FALSE(o.repeats_cycles);
  EXPECT_FALSE(o.unaligns);
  EXPECT_TRUE(o.fill_before_timing);
  ASSERT_EQ(o.notes.size(), 2u);
  EXPECT_EQ(o.notes[0].rfind("-m 2: ", 0), 0u) << o.notes[0];
  EXPECT_EQ(o.notes[1].rfind("-I 1: ", 0), 0u) << o.notes[1];
}

TEST(PeerOptions, Refusals) {
  EXPECT_THROW(parse(kMpi, {}), UsageError);
  EXPECT_THROW(parse(kMpi, {"gather"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "--algo", "ring"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "-T", "5"}), UsageError);
  EXPECT_THROW(parse(kGloo, {"allreduce", "--algo", "bcube"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "-d", "half"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "-o", "avg"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "-b", "2M", "-e", "1M"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "-n", "0"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "-b", "12Q"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "-n"}), UsageError);
  EXPECT_THROW(parse(kMpi, {"allreduce", "--bogus", "1"}), UsageError);
}

TEST(PeerCollectives, NcclTestsShapesAndFactors) {
  const CollectiveSpec& ar = find_collective("allreduce");
  EXPECT_DOUBLE_EQ(ar.busbw_factor(4), 1.5);
  const CollectiveSpec& ag = find_collective("allgather");
  const Shape s = ag.shape(10, 4);  // 10 elements over 4 ranks: blocks of 2
  EXPECT_EQ(s.send_count, 2u);
  EXPECT_EQ(s.recv_count, 8u);
  EXPECT_DOUBLE_EQ(ag.busbw_factor(4), 0.75);
  const Shape rs = find_collective("reducescatter").shape(10, 4);
  EXPECT_EQ(rs.send_count, 8u);
  EXPECT_EQ(rs.recv_count, 2u);
  EXPECT_DOUBLE_EQ(find_collective("broadcast").busbw_factor(4), 1.0);
}

}  // namespace
}  // namespace kolo::peers

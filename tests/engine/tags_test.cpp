// The engine's message stamps survive the trip through a transport tag, and describe() says
// what a mismatched message was.
#include <gtest/gtest.h>

#include "engine/tags.hpp"

using namespace kolo;

TEST(Tags, RoundTrip) {
  engine::Stamp s;
  s.seq = 123456789012ull;
  s.kind = algo::CollKind::reduce_scatter;
  s.dtype = DataType::bfloat16;
  s.op = ReduceKind::max;
  s.algo_id = 3;
  s.count = (1ull << 40) + 7;
  s.root_or_tag = 0xdeadbeef;
  engine::Stamp d = engine::decode(engine::encode(s));
  EXPECT_EQ(d.seq, s.seq);
  EXPECT_EQ(d.kind, s.kind);
  EXPECT_EQ(d.dtype, s.dtype);
  EXPECT_EQ(d.op, s.op);
  EXPECT_EQ(d.algo_id, s.algo_id);
  EXPECT_EQ(d.count, s.count);
  EXPECT_EQ(d.root_or_tag, s.root_or_tag);
}

TEST(Tags, DifferentCollectivesGetDifferentTags) {
  engine::Stamp a, b;
  a.kind = algo::CollKind::allreduce;
  b.kind = algo::CollKind::broadcast;
  EXPECT_FALSE(engine::encode(a) == engine::encode(b));
  b = a;
  b.count = 1;
  EXPECT_FALSE(engine::encode(a) == engine::encode(b));
  b = a;
  b.seq = 1;
  EXPECT_FALSE(engine::encode(a) == engine::encode(b));
}

TEST(Tags, DescribeNamesTheCollective) {
  engine::Stamp s;
  s.seq = 7;
  s.kind = algo::CollKind::allreduce;
  s.count = 100;
  std::string d = engine::describe(s);
  EXPECT_NE(d.find("allreduce #7"), std::string::npos) << d;
  EXPECT_NE(d.find("count 100"), std::string::npos) << d;
  EXPECT_NE(d.find("float32"), std::string::npos) << d;
}

// Groups sharing one set of connections (split with share_connections) are told apart by the
// group id in the tag's first word, above a 48-bit sequence number.
TEST(Tags, GroupIdTravelsAndSeparatesGroups) {
  engine::Stamp a;
  a.seq = (1ull << 48) - 1;
  a.group = 0xbeef;
  engine::Stamp d = engine::decode(engine::encode(a));
  EXPECT_EQ(d.seq, a.seq);
  EXPECT_EQ(d.group, a.group);
  engine::Stamp b = a;
  b.group = 0;
  EXPECT_FALSE(engine::encode(a) == engine::encode(b));
  EXPECT_EQ(engine::decode(engine::encode(b)).seq, a.seq) << "the id must not leak into the sequence number";
  EXPECT_NE(engine::describe(a, "default/split0.color1").find("of group default/split0.color1"), std::string::npos);
  EXPECT_EQ(engine::describe(a).find("of group"), std::string::npos) << "no group name unless asked for";
}

// The rank maps of subgroups that share their parent's connections (engine/shared_group.hpp):
// a child's rank goes to the right Context peer and back, nesting composes the maps (a
// grandchild maps straight onto the Context), and ids are never the owner's 0.
#include <gtest/gtest.h>

#include "engine/shared_group.hpp"

using namespace kolo;

namespace {

engine::GroupInfo owner(int size) {
  engine::GroupInfo g;
  g.name = "default";
  g.size = size;
  return g;
}

}  // namespace

TEST(SharedGroup, ChildMapsItsRanksOntoTheParentsPeers) {
  const engine::GroupInfo world = owner(8);
  // The odd ranks, highest first: child rank 0 is world rank 7.
  auto child = engine::make_shared_group(world, 8, "default/split0.color1", "kolo/default/0/split0.color1", 1,
                                         {7, 5, 3, 1}, algo::HostLayout::single_host(4), nullptr);
  ASSERT_TRUE(child->shares());
  EXPECT_EQ(child->owner, "default");
  EXPECT_EQ(child->size, 4);
  EXPECT_EQ(child->to_ctx(0), 7);
  EXPECT_EQ(child->to_ctx(3), 1);
  EXPECT_EQ(child->from_ctx_peer(5), 1);
  EXPECT_EQ(child->from_ctx_peer(2), -1) << "world rank 2 is not a member";
  EXPECT_EQ(child->from_ctx_peer(-1), -1);
  EXPECT_NE(child->id, 0);
  EXPECT_NE(child->label().find("where this is rank 5"), std::string::npos) << child->label();
}

TEST(SharedGroup, NestedChildMapsStraightOntoTheContext) {
  const engine::GroupInfo world = owner(8);
  auto child = engine::make_shared_group(world, 8, "c", "p/c", 0, {1, 3, 5, 7}, algo::HostLayout::single_host(4), nullptr);
  // Child ranks 3 and 1 (world 7 and 3), in that order.
  auto grand = engine::make_shared_group(*child, 8, "c/g", "p/c/g", 0, {3, 1}, algo::HostLayout::single_host(2), nullptr);
  EXPECT_EQ(grand->owner, "default") << "the owner of the connections, not the parent";
  EXPECT_EQ(grand->to_ctx(0), 7);
  EXPECT_EQ(grand->to_ctx(1), 3);
  EXPECT_EQ(grand->from_ctx_peer(3), 1);
  EXPECT_EQ(grand->from_ctx_peer(1), -1);
  EXPECT_NE(grand->id, child->id);
}

TEST(SharedGroup, OwnerIsTheIdentity) {
  const engine::GroupInfo world = owner(4);
  EXPECT_FALSE(world.shares());
  EXPECT_EQ(world.to_ctx(2), 2);
  EXPECT_EQ(world.from_ctx_peer(3), 3);
  EXPECT_EQ(world.label(), "group default");
}

TEST(SharedGroup, IdsAreNeverZeroAndDifferPerPrefix) {
  int same = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint16_t a = engine::shared_group_id("kolo/default/0/split" + std::to_string(i) + ".color0");
    const uint16_t b = engine::shared_group_id("kolo/default/0/split" + std::to_string(i) + ".color1");
    EXPECT_NE(a, 0);
    same += a == b;
  }
  EXPECT_LT(same, 3);
}

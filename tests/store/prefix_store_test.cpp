// PrefixStore specifics: namespacing over a shared base, its own timeout, and a null base.
#include <gtest/gtest.h>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "store_test_util.hpp"

namespace kolo {
namespace {

using namespace store_test;

TEST(PrefixStore, PrefixesKeepGroupsApartOverOneBase) {
  auto base = make_hash_store();
  auto group_a = make_prefix_store("a", base);
  auto group_b = make_prefix_store("b", base);
  group_a->set("rank0", std::string("from a"));
  group_b->set("rank0", std::string("from b"));
  EXPECT_EQ(group_a->get_string("rank0"), "from a");
  EXPECT_EQ(group_b->get_string("rank0"), "from b");
  EXPECT_EQ(base->get_string("a/rank0"), "from a");
  EXPECT_EQ(base->get_string("b/rank0"), "from b");
  EXPECT_FALSE(base->check({"rank0"}));

  EXPECT_EQ(group_a->add("count", 2), 2);
  EXPECT_EQ(base->add("a/count", 1), 3);
  EXPECT_TRUE(group_b->compare_set("count", {}, Bytes{1}) == Bytes{1}) << "b/count must be independent";
  EXPECT_TRUE(group_a->delete_key("rank0"));
  EXPECT_TRUE(base->check({"b/rank0"}));
  EXPECT_FALSE(base->check({"a/rank0"}));
}

TEST(PrefixStore, NestedPrefixesCompose) {
  auto base = make_hash_store();
  auto inner = make_prefix_store("sub", make_prefix_store("world", base));
  inner->set("k", std::string("v"));
  EXPECT_EQ(base->get_string("world/sub/k"), "v");
}

TEST(PrefixStore, UsesItsOwnTimeout) {
  auto base = make_hash_store();
  base->set_timeout(Ms(20000));
  auto prefixed = make_prefix_store("p", base);
  EXPECT_EQ(prefixed->timeout(), Ms(20000)) << "starts with the base's timeout";
  prefixed->set_timeout(Ms(150));
  Stopwatch clock;
  EXPECT_THROW(prefixed->get("missing"), TimeoutError);
  EXPECT_LE(clock.elapsed(), Ms(150) + kTimeoutSlack);
  EXPECT_EQ(base->timeout(), Ms(20000)) << "the base's timeout is untouched";
}

TEST(PrefixStore, NullBaseIsRefused) { EXPECT_THROW(make_prefix_store("p", nullptr), InvalidArgument); }

}  // namespace
}  // namespace kolo

// ProcessGroup::shrink's agreement (engine/shrink.hpp) with threads as ranks on one in-process
// store: the decision rules that real jobs rarely reach (the lowest rank dying before it
// publishes, nobody knowing who is lost, late ranks, named lists that differ or stay absent).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/shrink.hpp"
#include "kolo/error.hpp"
#include "kolo/store.hpp"

namespace kolo::engine {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

ShrinkRequest request(int rank, int size, std::vector<int> lost, milliseconds timeout,
                      std::optional<std::vector<int>> exclude = std::nullopt) {
  ShrinkRequest r;
  r.ns = "kolo/test/0/gen1/shrink";
  r.generation = 1;
  r.group = "test";
  r.rank = rank;
  r.size = size;
  r.lost = std::move(lost);
  r.exclude = std::move(exclude);
  r.deadline = Clock::now() + timeout;
  r.takeover = milliseconds(100);
  return r;
}

// Each request on its own thread; their results (or what they threw), in order.
std::vector<std::vector<int>> agree_all(Store& store, const std::vector<ShrinkRequest>& reqs) {
  std::vector<std::future<std::vector<int>>> f;
  for (const ShrinkRequest& r : reqs)
    f.push_back(std::async(std::launch::async, [&store, r] { return agree_survivors(store, r, [] {}); }));
  std::vector<std::vector<int>> out;
  for (auto& x : f) out.push_back(x.get());
  return out;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(ShrinkAgreement, RankListsRoundTripAndMalformedOnesAreRefused) {
  EXPECT_EQ(encode_ranks({0, 2, 13}), "0,2,13");
  EXPECT_EQ(decode_ranks("0,2,13"), (std::vector<int>{0, 2, 13}));
  EXPECT_EQ(decode_ranks(""), std::vector<int>{});
  EXPECT_FALSE(decode_ranks("0,,1"));
  EXPECT_FALSE(decode_ranks("0,-1"));
  EXPECT_FALSE(decode_ranks("1,x"));
}

// Only rank 1 knows rank 2 is gone; its presence key tells the lowest rank, which decides at
// once instead of waiting out the 10 s deadline.
TEST(ShrinkAgreement, OneReportOfALostRankEndsTheWait) {
  auto store = make_hash_store();
  const auto t0 = Clock::now();
  const auto got = agree_all(*store, {request(0, 4, {}, milliseconds(10000)), request(1, 4, {2}, milliseconds(10000)),
                                      request(3, 4, {}, milliseconds(10000))});
  for (const auto& m : got) EXPECT_EQ(m, (std::vector<int>{0, 1, 3}));
  EXPECT_LT(seconds_since(t0), 2.0);
}

// Nobody knows who is missing: the lowest rank decides at its deadline, with whoever came.
TEST(ShrinkAgreement, WithoutReportsTheDeadlineDecides) {
  auto store = make_hash_store();
  const auto t0 = Clock::now();
  const auto got = agree_all(*store, {request(0, 4, {}, milliseconds(300)), request(1, 4, {}, milliseconds(300)),
                                      request(2, 4, {}, milliseconds(300))});
  for (const auto& m : got) EXPECT_EQ(m, (std::vector<int>{0, 1, 2}));
  EXPECT_GE(seconds_since(t0), 0.29);
  EXPECT_LT(seconds_since(t0), 2.0);
}

// Rank 0 said it was present, then died before it published: rank 1 takes over one step after
// the deadline, without rank 0.
TEST(ShrinkAgreement, NextRankTakesOverWhenTheLowestDiesBeforePublishing) {
  auto store = make_hash_store();
  store->set("kolo/test/0/gen1/shrink/present/0", std::string("lost "));
  const auto t0 = Clock::now();
  const auto got = agree_all(*store, {request(1, 4, {}, milliseconds(200)), request(2, 4, {}, milliseconds(200)),
                                      request(3, 4, {}, milliseconds(200))});
  for (const auto& m : got) EXPECT_EQ(m, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(seconds_since(t0), 0.29);  // deadline + one takeover step
  EXPECT_LT(seconds_since(t0), 2.0);
}

// A rank that answers after the decision (it was stopped) is refused, naming the generation.
TEST(ShrinkAgreement, ALateRankIsExcludedWithTheGeneration) {
  auto store = make_hash_store();
  agree_all(*store, {request(0, 3, {2}, milliseconds(5000)), request(1, 3, {2}, milliseconds(5000))});
  const auto t0 = Clock::now();
  try {
    agree_survivors(*store, request(2, 3, {0, 1}, milliseconds(5000)), [] {});
    FAIL() << "the late rank was let in";
  } catch (const ExcludedError& e) {
    EXPECT_EQ(e.generation(), 1);
    EXPECT_NE(std::string(e.what()).find("rank 2 of group test was excluded from generation 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("from ranks 0,1"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 1.0);
}

// Named survivors that do not all come: a TimeoutError naming the absent one, at the deadline.
TEST(ShrinkAgreement, NamedFormTimesOutNamingTheAbsentSurvivor) {
  auto store = make_hash_store();
  std::vector<int> exclude{3};
  try {
    agree_all(*store, {request(0, 4, {}, milliseconds(200), exclude), request(1, 4, {}, milliseconds(200), exclude)});
    FAIL() << "decided without rank 2";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(e.peer_rank(), 2);
    EXPECT_NE(std::string(e.what()).find("rank(s) 2, named as survivors, did not call shrink in time"), std::string::npos)
        << e.what();
  }
}

// Named survivors: every member proposes the same list; one that named others is refused.
TEST(ShrinkAgreement, NamedFormAgreesAndRefusesADifferentList) {
  auto store = make_hash_store();
  std::vector<int> exclude{1};
  const auto got = agree_all(*store, {request(0, 4, {}, milliseconds(5000), exclude), request(2, 4, {}, milliseconds(5000), exclude),
                                      request(3, 4, {}, milliseconds(5000), exclude)});
  for (const auto& m : got) EXPECT_EQ(m, (std::vector<int>{0, 2, 3}));
  EXPECT_THROW(agree_survivors(*store, request(3, 4, {}, milliseconds(5000), std::vector<int>{2}), [] {}), InvalidArgument);
}

}  // namespace
}  // namespace kolo::engine

// The blame board (src/engine/blame.hpp) on an in-process store, ranks as threads: chains are
// followed to the rank that does not report, loops and unrelated entries fall back to the rank
// waited for, a late reporter is still found within the grace, and a store that hangs or fails
// costs at most the grace.
#include "engine/blame.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "kolo/error.hpp"

namespace kolo::engine {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout(10000);  // the collective's: the grace is at most half of it

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

BlameBoard board(const std::shared_ptr<Store>& store, int rank, milliseconds grace = milliseconds(300)) {
  return BlameBoard(store, "kolo/test/0", rank, 4, grace);
}

TEST(Blame, EntriesRoundTripAndGarbageIsRefused) {
  const WaitFor w{true, 17, 3};
  EXPECT_EQ(encode_wait(w), "c17 3");
  const auto back = decode_wait("c17 3");
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->collective);
  EXPECT_EQ(back->seq, 17u);
  EXPECT_EQ(back->peer, 3);
  EXPECT_FALSE(decode_wait("p4 2").value().collective);
  for (const char* bad : {"", "c", "c17", "c17 ", "x17 3", "c 3", "c17 -3", "c1x 3", "c17 99999999999", "c17 3 4"})
    EXPECT_FALSE(decode_wait(bad).has_value()) << bad;
}

TEST(Blame, RanksStuckBehindOneAnotherAllNameTheRankThatDoesNotReport) {
  // A ring with rank 3 stopped: 0 waits for 3, 1 for 0, 2 for 1, all in allreduce #5.
  auto store = make_hash_store();
  std::vector<std::future<std::optional<Blame>>> settled;
  for (int r = 0; r < 3; ++r)
    settled.push_back(std::async(std::launch::async, [store, r] {
      return board(store, r).settle(WaitFor{true, 5, (r + 3) % 4}, kTimeout);
    }));
  const std::vector<std::vector<int>> chains = {{3}, {0, 3}, {1, 0, 3}};
  for (int r = 0; r < 3; ++r) {
    const std::optional<Blame> b = settled[static_cast<size_t>(r)].get();
    ASSERT_TRUE(b.has_value()) << "rank " << r;
    EXPECT_EQ(b->culprit(), 3) << "rank " << r;
    EXPECT_EQ(b->chain, chains[static_cast<size_t>(r)]) << "rank " << r;
  }
  EXPECT_EQ(store->get_string("kolo/test/0/blame/2"), "c5 1");  // one fixed key per rank
}

TEST(Blame, AReporterLateWithinTheGraceIsFollowed) {
  auto store = make_hash_store();
  auto late = std::async(std::launch::async, [store] {
    std::this_thread::sleep_for(milliseconds(150));
    store->set("kolo/test/0/blame/1", encode_wait(WaitFor{true, 8, 2}));
  });
  const std::optional<Blame> b = board(store, 0, milliseconds(1000)).settle(WaitFor{true, 8, 1}, kTimeout);
  late.get();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->chain, (std::vector<int>{1, 2}));
}

TEST(Blame, TheRankAtTheEndIsBlamedOnlyAfterTheGrace) {
  auto store = make_hash_store();
  const auto start = Clock::now();
  const std::optional<Blame> b = board(store, 0, milliseconds(300)).settle(WaitFor{true, 1, 2}, kTimeout);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->chain, std::vector<int>{2});
  EXPECT_GE(seconds_since(start), 0.29);
  EXPECT_LE(seconds_since(start), 0.6);
}

TEST(Blame, GraceIsAtMostHalfTheTimeout) {
  auto store = make_hash_store();
  const BlameBoard b = board(store, 0, milliseconds(1000));
  EXPECT_EQ(b.grace(milliseconds(600)), milliseconds(300));
  EXPECT_EQ(b.grace(milliseconds(5000)), milliseconds(1000));
  const auto start = Clock::now();
  EXPECT_TRUE(b.settle(WaitFor{true, 1, 2}, milliseconds(200)).has_value());
  EXPECT_LE(seconds_since(start), 0.4);
}

TEST(Blame, ALoopFallsBackToTheRankWaitedFor) {
  // 0 and 1 wait for each other (both alive: a deadlock, not a lost rank).
  auto store = make_hash_store();
  store->set("kolo/test/0/blame/1", encode_wait(WaitFor{true, 4, 0}));
  EXPECT_FALSE(board(store, 0).settle(WaitFor{true, 4, 1}, kTimeout).has_value());
  // 0 waits for 1, 1 for 2, 2 for 1.
  store->set("kolo/test/0/blame/1", encode_wait(WaitFor{true, 4, 2}));
  store->set("kolo/test/0/blame/2", encode_wait(WaitFor{true, 4, 1}));
  EXPECT_FALSE(board(store, 0).settle(WaitFor{true, 4, 1}, kTimeout).has_value());
}

TEST(Blame, AnEntryForALaterCollectiveIsNotPartOfTheChain) {
  // Rank 1 is waited for in #4, so it has not finished #4: an entry of #9 is from elsewhere.
  auto store = make_hash_store();
  store->set("kolo/test/0/blame/1", encode_wait(WaitFor{true, 9, 2}));
  EXPECT_FALSE(board(store, 0).settle(WaitFor{true, 4, 1}, kTimeout).has_value());
  // An earlier collective continues it (rank 1 is still in #3), and so does a point-to-point
  // entry, whose numbers count per pair.
  store->set("kolo/test/0/blame/1", encode_wait(WaitFor{true, 3, 2}));
  EXPECT_EQ(board(store, 0).settle(WaitFor{true, 4, 1}, kTimeout).value().chain, (std::vector<int>{1, 2}));
  store->set("kolo/test/0/blame/1", encode_wait(WaitFor{false, 9, 3}));
  EXPECT_EQ(board(store, 0).settle(WaitFor{true, 4, 1}, kTimeout).value().chain, (std::vector<int>{1, 3}));
}

TEST(Blame, GraceZeroIsOffAndTouchesNoStore) {
  auto store = make_hash_store();
  EXPECT_FALSE(board(store, 0, milliseconds(0)).settle(WaitFor{true, 1, 2}, kTimeout).has_value());
  EXPECT_EQ(store->num_keys(), 0);
}

// A store that works for its first `healthy_calls` calls (on an in-process store), then hangs
// until released (its host is stopped) or fails (it is gone).
class BrokenStore final : public Store {
 public:
  BrokenStore(bool hang, int healthy_calls) : hang_(hang), healthy_(healthy_calls) {}
  ~BrokenStore() override = default;
  void release() {
    std::lock_guard<std::mutex> lk(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::atomic<int> calls{0};
  std::shared_ptr<Store> inner = make_hash_store();

  using Store::set;
  using Store::wait;
  void set(const std::string& k, const Bytes& v) override { gate(), inner->set(k, v); }
  Bytes get(const std::string& k) override { return gate(), inner->get(k); }
  int64_t add(const std::string& k, int64_t d) override { return gate(), inner->add(k, d); }
  Bytes compare_set(const std::string& k, const Bytes& e, const Bytes& d) override { return gate(), inner->compare_set(k, e, d); }
  bool delete_key(const std::string& k) override { return gate(), inner->delete_key(k); }
  bool check(const std::vector<std::string>& k) override { return gate(), inner->check(k); }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override { gate(), inner->wait(k, t); }
  int64_t num_keys() override { return gate(), inner->num_keys(); }

 private:
  void gate() {
    if (++calls <= healthy_) return;
    if (hang_) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return released_; });
    }
    throw PeerError("BrokenStore: connection refused", -1);
  }
  bool hang_;
  int healthy_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

TEST(Blame, AStoreThatHangsCostsTheGraceNotAHang) {
  auto store = std::make_shared<BrokenStore>(true, 0);
  const auto start = Clock::now();
  EXPECT_FALSE(board(store, 0, milliseconds(300)).settle(WaitFor{true, 1, 2}, kTimeout).has_value());
  EXPECT_LE(seconds_since(start), 0.3 + 0.2);  // the grace plus the last answer's allowance
  EXPECT_EQ(store->calls.load(), 1);
  store->release();  // the helper thread, still inside set(), ends
}

// A TCPStore's SET has no reply: towards a frozen store it "succeeds" into a socket buffer. Only
// an answered read makes the chain count; here none answers, so there is no chain.
TEST(Blame, ASetWithoutAnAnsweredReadIsNoChain) {
  auto store = std::make_shared<BrokenStore>(true, 1);  // set, then every call hangs
  EXPECT_FALSE(board(store, 0, milliseconds(300)).settle(WaitFor{true, 1, 2}, kTimeout).has_value());
  store->release();
}

TEST(Blame, AStoreThatFailsFallsBackAtOnce) {
  auto store = std::make_shared<BrokenStore>(false, 0);
  const auto start = Clock::now();
  EXPECT_FALSE(board(store, 0, milliseconds(1000)).settle(WaitFor{true, 1, 2}, kTimeout).has_value());
  EXPECT_LE(seconds_since(start), 0.2);
}

// The store went away (init_from_env's lives in rank 0, which may raise and exit first) after
// this rank published and read rank 1's entry: the chain ends where it got to, at once.
TEST(Blame, AStoreThatFailsMidwayEndsTheChainWhereItGot) {
  auto store = std::make_shared<BrokenStore>(false, 3);  // set, check(1), get(1), then gone
  store->inner->set("kolo/test/0/blame/1", encode_wait(WaitFor{true, 4, 2}));
  const auto start = Clock::now();
  const std::optional<Blame> b = board(store, 0, milliseconds(1000)).settle(WaitFor{true, 4, 1}, kTimeout);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->chain, (std::vector<int>{1, 2}));
  EXPECT_LE(seconds_since(start), 0.2);
}

TEST(Blame, AStoreThatHangsMidwayEndsTheChainWhereItGotAfterTheGrace) {
  auto store = std::make_shared<BrokenStore>(true, 3);
  store->inner->set("kolo/test/0/blame/1", encode_wait(WaitFor{true, 4, 2}));
  const auto start = Clock::now();
  const std::optional<Blame> b = board(store, 0, milliseconds(300)).settle(WaitFor{true, 4, 1}, kTimeout);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->chain, (std::vector<int>{1, 2}));
  EXPECT_LE(seconds_since(start), 0.3 + 0.2);
  store->release();
}

}  // namespace
}  // namespace kolo::engine

// The behaviour every Store promises, checked on each kind: hash, file, TCP, and a prefix store
// over each of them. Each test gets a fresh "world" and may open several handles to it (another
// FileStore on the same path, another TCP client), so cross-handle visibility is checked too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <set>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "store_test_util.hpp"

namespace kolo {
namespace {

using namespace store_test;

Bytes bytes_of(std::initializer_list<int> values) {
  Bytes out;
  for (int v : values) out.push_back(static_cast<uint8_t>(v));
  return out;
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

// One shared store; handle() opens another view of it.
class StoreWorld {
 public:
  virtual ~StoreWorld() = default;
  virtual std::shared_ptr<Store> handle() = 0;
};

class HashWorld : public StoreWorld {
 public:
  std::shared_ptr<Store> handle() override { return store_; }

 private:
  std::shared_ptr<Store> store_ = make_hash_store();
};

class FileWorld : public StoreWorld {
 public:
  std::shared_ptr<Store> handle() override { return make_file_store(dir_.file("store")); }

 private:
  ScratchDir dir_;
};

class TcpWorld : public StoreWorld {
 public:
  TcpWorld() {
    TCPStore::Options opts;
    opts.port = 0;
    opts.is_server = true;
    opts.timeout = Ms(5000);
    server_ = TCPStore::create(opts);
  }
  std::shared_ptr<Store> handle() override {
    if (!first_handed_out_) {
      first_handed_out_ = true;
      return server_;
    }
    TCPStore::Options opts;
    opts.port = server_->port();
    opts.timeout = Ms(5000);
    return TCPStore::create(opts);
  }

 private:
  std::shared_ptr<TCPStore> server_;
  bool first_handed_out_ = false;
};

class PrefixWorld : public StoreWorld {
 public:
  explicit PrefixWorld(std::unique_ptr<StoreWorld> base) : base_(std::move(base)) {}
  std::shared_ptr<Store> handle() override { return make_prefix_store("group7", base_->handle()); }

 private:
  std::unique_ptr<StoreWorld> base_;
};

struct StoreKind {
  std::string name;
  std::function<std::unique_ptr<StoreWorld>()> make;
};

std::vector<StoreKind> all_kinds() {
  auto hash = [] { return std::unique_ptr<StoreWorld>(new HashWorld); };
  auto file = [] { return std::unique_ptr<StoreWorld>(new FileWorld); };
  auto tcp = [] { return std::unique_ptr<StoreWorld>(new TcpWorld); };
  return {
      {"hash", hash},
      {"file", file},
      {"tcp", tcp},
      {"prefix_hash", [hash] { return std::unique_ptr<StoreWorld>(new PrefixWorld(hash())); }},
      {"prefix_file", [file] { return std::unique_ptr<StoreWorld>(new PrefixWorld(file())); }},
      {"prefix_tcp", [tcp] { return std::unique_ptr<StoreWorld>(new PrefixWorld(tcp())); }},
  };
}

class StoreConformance : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    world_ = GetParam().make();
    store_ = world_->handle();
  }
  void TearDown() override {
    store_.reset();
    world_.reset();
  }
  std::unique_ptr<StoreWorld> world_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreConformance, SetThenGetReturnsExactBytes) {
  const Bytes binary = bytes_of({0, 1, 255, 0, 7});
  store_->set("binary", binary);
  store_->set("empty", Bytes{});
  EXPECT_EQ(store_->get("binary"), binary);
  EXPECT_EQ(store_->get("empty"), Bytes{});

  auto other = world_->handle();
  EXPECT_EQ(other->get("binary"), binary);
  other->set("binary", std::string("overwritten"));
  EXPECT_EQ(store_->get_string("binary"), "overwritten");
}

TEST_P(StoreConformance, LargeValueRoundTrips) {
  Bytes big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  store_->set("big", big);
  EXPECT_EQ(world_->handle()->get("big"), big);
}

TEST_P(StoreConformance, GetOfMissingKeyTimesOutNamingIt) {
  store_->set_timeout(Ms(200));
  Stopwatch clock;
  try {
    store_->get("never-set");
    FAIL() << "get() of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never-set"), std::string::npos) << e.what();
  }
  EXPECT_GE(clock.elapsed(), Ms(190));
  EXPECT_LE(clock.elapsed(), Ms(200) + kTimeoutSlack);
}

TEST_P(StoreConformance, WaitTimesOutNamingOnlyTheMissingKeys) {
  store_->set("present", std::string("x"));
  Stopwatch clock;
  try {
    store_->wait({"present", "absent-1", "absent-2"}, Ms(200));
    FAIL() << "wait() for missing keys returned";
  } catch (const TimeoutError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("absent-1"), std::string::npos) << what;
    EXPECT_NE(what.find("absent-2"), std::string::npos) << what;
    EXPECT_EQ(what.find("present"), std::string::npos) << what;
  }
  EXPECT_GE(clock.elapsed(), Ms(190));
  EXPECT_LE(clock.elapsed(), Ms(200) + kTimeoutSlack);
}

TEST_P(StoreConformance, WaitUsesTheStoreTimeoutByDefault) {
  store_->set_timeout(Ms(150));
  Stopwatch clock;
  EXPECT_THROW(store_->wait({"missing"}), TimeoutError);
  EXPECT_GE(clock.elapsed(), Ms(140));
  EXPECT_LE(clock.elapsed(), Ms(150) + kTimeoutSlack);
}

TEST_P(StoreConformance, WaitForPresentOrNoKeysReturnsAtOnce) {
  store_->set("a", std::string("1"));
  Stopwatch clock;
  store_->wait({}, Ms(5000));
  store_->wait({"a"}, Ms(5000));
  EXPECT_LT(clock.elapsed(), Ms(1000));
}

TEST_P(StoreConformance, WaitWakesWhenAnotherHandleSetsTheKeys) {
  auto setter = world_->handle();
  Stopwatch clock;
  auto waiter = std::async(std::launch::async, [&] { store_->wait({"k1", "k2"}, Ms(5000)); });
  std::this_thread::sleep_for(Ms(50));
  setter->set("k1", std::string("a"));
  EXPECT_EQ(waiter.wait_for(Ms(100)), std::future_status::timeout) << "woke with k2 still missing";
  setter->set("k2", std::string("b"));
  ASSERT_EQ(waiter.wait_for(Ms(3000)), std::future_status::ready);
  waiter.get();
  EXPECT_LT(clock.elapsed(), Ms(3000));
}

TEST_P(StoreConformance, GetWakesWithTheValueAnotherHandleSets) {
  auto setter = world_->handle();
  store_->set_timeout(Ms(5000));
  auto getter = std::async(std::launch::async, [&] { return store_->get_string("late"); });
  std::this_thread::sleep_for(Ms(50));
  setter->set("late", std::string("arrived"));
  ASSERT_EQ(getter.wait_for(Ms(3000)), std::future_status::ready);
  EXPECT_EQ(getter.get(), "arrived");
}

TEST_P(StoreConformance, AddCreatesCounterAtZeroAndAccumulates) {
  EXPECT_EQ(store_->add("counter", 5), 5);
  EXPECT_EQ(store_->add("counter", -7), -2);
  EXPECT_EQ(world_->handle()->add("counter", 0), -2);
  EXPECT_EQ(store_->get_string("counter"), "-2");  // counters are decimal text, as in c10d
  store_->set("counter", std::string("40"));
  EXPECT_EQ(store_->add("counter", 2), 42);
}

TEST_P(StoreConformance, AddToNonIntegerValueIsInvalidArgument) {
  store_->set("word", std::string("hello"));
  EXPECT_THROW(store_->add("word", 1), InvalidArgument);
  EXPECT_EQ(store_->get_string("word"), "hello");
}

TEST_P(StoreConformance, AddThatOverflowsIsInvalidArgumentAndChangesNothing) {
  store_->set("big", std::string("9223372036854775800"));
  EXPECT_THROW(store_->add("big", 100), InvalidArgument);
  EXPECT_EQ(store_->get_string("big"), "9223372036854775800");
  EXPECT_EQ(store_->add("big", 7), INT64_MAX);
  EXPECT_EQ(store_->add("neg", INT64_MIN), INT64_MIN);
  EXPECT_THROW(store_->add("neg", -1), InvalidArgument);
}

TEST_P(StoreConformance, ConcurrentAddsFromManyHandlesAreAtomic) {
  constexpr int kThreads = 4;
  constexpr int kAddsPerThread = 150;
  std::vector<std::shared_ptr<Store>> handles;
  for (int t = 0; t < kThreads; ++t) handles.push_back(world_->handle());
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAddsPerThread; ++i) seen[t].push_back(handles[t]->add("shared", 1));
    });
  }
  for (auto& th : threads) th.join();
  // Atomic increments hand out every value 1..N exactly once.
  std::set<int64_t> all;
  for (const auto& v : seen) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), size_t(kThreads * kAddsPerThread));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAddsPerThread);
  EXPECT_EQ(store_->add("shared", 0), kThreads * kAddsPerThread);
}

TEST_P(StoreConformance, CompareSetFollowsC10dRules) {
  // Absent key + empty expectation: created.
  EXPECT_EQ(store_->compare_set("cas", {}, text("first")), text("first"));
  // Wrong expectation: unchanged, and the current value comes back.
  EXPECT_EQ(store_->compare_set("cas", text("wrong"), text("second")), text("first"));
  EXPECT_EQ(store_->get("cas"), text("first"));
  // Right expectation: swapped.
  EXPECT_EQ(store_->compare_set("cas", text("first"), text("second")), text("second"));
  EXPECT_EQ(world_->handle()->get("cas"), text("second"));
  // Absent key + non-empty expectation: nothing stored, nothing returned.
  EXPECT_EQ(store_->compare_set("absent", text("x"), text("y")), Bytes{});
  EXPECT_FALSE(store_->check({"absent"}));
}

TEST_P(StoreConformance, CompareSetElectsExactlyOneWinner) {
  constexpr int kThreads = 4;
  std::vector<std::shared_ptr<Store>> handles;
  for (int t = 0; t < kThreads; ++t) handles.push_back(world_->handle());
  std::vector<Bytes> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { results[t] = handles[t]->compare_set("leader", {}, text("rank" + std::to_string(t))); });
  }
  for (auto& th : threads) th.join();
  int winners = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(results[t], results[0]) << "thread " << t << " saw another leader";
    winners += results[t] == text("rank" + std::to_string(t)) ? 1 : 0;
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(store_->get("leader"), results[0]);
}

TEST_P(StoreConformance, DeleteKeyRemovesItOnce) {
  store_->set("doomed", std::string("v"));
  EXPECT_TRUE(store_->check({"doomed"}));
  EXPECT_TRUE(world_->handle()->delete_key("doomed"));
  EXPECT_FALSE(store_->delete_key("doomed"));
  EXPECT_FALSE(store_->check({"doomed"}));
  store_->set_timeout(Ms(100));
  EXPECT_THROW(store_->get("doomed"), TimeoutError);
  // A deleted counter restarts from zero.
  store_->add("count", 9);
  store_->delete_key("count");
  EXPECT_EQ(store_->add("count", 1), 1);
}

TEST_P(StoreConformance, CheckRequiresEveryKey) {
  store_->set("a", std::string("1"));
  store_->set("b", std::string("2"));
  EXPECT_TRUE(store_->check({"a", "b"}));
  EXPECT_TRUE(store_->check({}));
  EXPECT_FALSE(store_->check({"a", "c"}));
  EXPECT_FALSE(world_->handle()->check({"c"}));
}

TEST_P(StoreConformance, NumKeysCountsSetAddedAndDeletedKeys) {
  EXPECT_EQ(store_->num_keys(), 0);
  store_->set("a", std::string("1"));
  store_->set("a", std::string("2"));  // overwriting adds nothing
  store_->add("b", 3);
  store_->compare_set("c", {}, text("x"));
  EXPECT_EQ(world_->handle()->num_keys(), 3);
  store_->delete_key("a");
  EXPECT_EQ(store_->num_keys(), 2);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreConformance, ::testing::ValuesIn(all_kinds()),
                         [](const ::testing::TestParamInfo<StoreKind>& info) { return info.param.name; });

}  // namespace
}  // namespace kolo

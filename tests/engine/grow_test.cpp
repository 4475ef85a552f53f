// ProcessGroup::grow's agreement (engine/grow.hpp) with threads as joiners on one in-process
// store: arrival order, the cost of a check with nobody waiting, a bounded number admitted per
// round, a joiner that withdrew (never admitted afterwards), a ticket whose joiner has not yet
// said it waits, a closed line, and the decider's wait for a first joiner.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/grow.hpp"
#include "kolo/error.hpp"
#include "kolo/store.hpp"

namespace kolo::engine {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const std::string kNs = "kolo/test/0/join";

// Counts the calls that reach the store, to check what a grow with nobody waiting costs.
class CountingStore : public Store {
 public:
  std::shared_ptr<Store> base = make_hash_store();
  std::atomic<int> calls{0};
  using Store::get;
  using Store::set;
  using Store::wait;
  void set(const std::string& k, const Bytes& v) override { ++calls, base->set(k, v); }
  Bytes get(const std::string& k) override { return ++calls, base->get(k); }
  int64_t add(const std::string& k, int64_t d) override { return ++calls, base->add(k, d); }
  Bytes compare_set(const std::string& k, const Bytes& e, const Bytes& d) override { return ++calls, base->compare_set(k, e, d); }
  bool delete_key(const std::string& k) override { return ++calls, base->delete_key(k); }
  bool check(const std::vector<std::string>& keys) override { return ++calls, base->check(keys); }
  void wait(const std::vector<std::string>& keys, milliseconds t) override { ++calls, base->wait(keys, t); }
  int64_t num_keys() override { return ++calls, base->num_keys(); }
};

AdmitRequest admit(int members, int generation, int max_joiners = 0, milliseconds wait = milliseconds(0)) {
  AdmitRequest r;
  r.ns = kNs;
  r.group = "test";
  r.generation = generation;
  r.members = members;
  r.max_joiners = max_joiners;
  r.wait_until = Clock::now() + wait;
  return r;
}

JoinRequest joining(milliseconds timeout) {
  JoinRequest r;
  r.ns = kNs;
  r.group = "test";
  r.deadline = Clock::now() + timeout;
  return r;
}

// A joiner on its own thread, started once the previous ones hold their tickets (arrival order).
std::future<Admitted> start_joiner(Store& store, milliseconds timeout) {
  const int64_t before = store.add(kNs + "/tickets", 0);
  auto f = std::async(std::launch::async, [&store, timeout] { return wait_for_admission(store, joining(timeout)); });
  const std::string key = kNs + "/" + std::to_string(before + 1);
  const auto until = Clock::now() + milliseconds(5000);
  while (!store.check({key}) && Clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
  return f;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(GrowAgreement, AdmissionsRoundTripAndMalformedOnesAreRefused) {
  int g = 0, r = 0;
  int64_t n = 0;
  ASSERT_TRUE(decode_admission(encode_admission(2, 5, 17), g, r, n));
  EXPECT_EQ(g, 2);
  EXPECT_EQ(r, 5);
  EXPECT_EQ(n, 17);
  for (const char* bad : {"waiting", "withdrawn", "admitted 1 2", "admitted 1 2 0", "admitted 1 -2 3", "admitted 1 2 3x"})
    EXPECT_FALSE(decode_admission(bad, g, r, n)) << bad;
}

// The trainer checks at every step boundary: with nobody waiting, rank 0 makes one store call.
TEST(GrowAgreement, NobodyWaitingCostsOneStoreCall) {
  CountingStore store;
  int64_t next = 1;
  const Admission a = admit_joiners(store, admit(3, 1), next);
  EXPECT_EQ(a.round, 0);
  EXPECT_TRUE(a.tickets.empty());
  EXPECT_EQ(a.size, 3);
  EXPECT_EQ(store.calls.load(), 1);
  EXPECT_EQ(next, 1);
}

TEST(GrowAgreement, JoinersGetTheNextRanksInArrivalOrder) {
  auto store = make_hash_store();
  std::vector<std::future<Admitted>> joiners;
  for (int i = 0; i < 3; ++i) joiners.push_back(start_joiner(*store, milliseconds(10000)));
  int64_t next = 1;
  const Admission a = admit_joiners(*store, admit(2, 4), next);
  EXPECT_EQ(a.tickets, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(a.round, 1);
  EXPECT_EQ(a.size, 5);
  EXPECT_EQ(next, 4);
  for (int i = 0; i < 3; ++i) {
    const Admitted got = joiners[size_t(i)].get();
    EXPECT_EQ(got.ticket, i + 1);
    EXPECT_EQ(got.rank, 2 + i);
    EXPECT_EQ(got.size, 5);
    EXPECT_EQ(got.generation, 4);
    EXPECT_EQ(got.round, 1);
  }
  // Settled tickets are not admitted again; the check is one call again.
  EXPECT_TRUE(admit_joiners(*store, admit(5, 5), next).tickets.empty());
}

TEST(GrowAgreement, AtMostMaxJoinersPerRoundTheRestNextRound) {
  auto store = make_hash_store();
  auto first = start_joiner(*store, milliseconds(10000));
  auto second = start_joiner(*store, milliseconds(10000));
  int64_t next = 1;
  const Admission a = admit_joiners(*store, admit(3, 1, 1), next);
  EXPECT_EQ(a.tickets, std::vector<int64_t>{1});
  EXPECT_EQ(a.size, 4);
  const Admitted one = first.get();
  EXPECT_EQ(one.rank, 3);
  EXPECT_EQ(second.wait_for(milliseconds(100)), std::future_status::timeout) << "admitted beyond max_joiners";
  const Admission b = admit_joiners(*store, admit(4, 2, 1), next);
  EXPECT_EQ(b.tickets, std::vector<int64_t>{2});
  EXPECT_EQ(b.round, 2);
  const Admitted two = second.get();
  EXPECT_EQ(two.rank, 4);
  EXPECT_EQ(two.size, 5);
  EXPECT_EQ(two.generation, 2);
}

// The joiner's timeout withdraws it under the same key the decider claims with: a later grow
// skips it and admits the next one at the first free rank.
TEST(GrowAgreement, AJoinerThatTimedOutIsNeverAdmitted) {
  auto store = make_hash_store();
  const auto start = Clock::now();
  EXPECT_THROW(wait_for_admission(*store, joining(milliseconds(150))), TimeoutError);
  EXPECT_GE(seconds_since(start), 0.15);
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_EQ(store->get_string(kNs + "/1"), "withdrawn");
  auto next_joiner = start_joiner(*store, milliseconds(10000));
  int64_t next = 1;
  const Admission a = admit_joiners(*store, admit(2, 1), next);
  EXPECT_EQ(a.tickets, std::vector<int64_t>{2});
  EXPECT_EQ(next_joiner.get().rank, 2);
}

// A ticket taken but not yet marked waiting (its joiner is between the two calls) holds the
// queue: the tickets after it wait for the next round, so arrival order holds.
TEST(GrowAgreement, ATicketNotYetWaitingHoldsTheQueue) {
  auto store = make_hash_store();
  ASSERT_EQ(store->add(kNs + "/tickets", 1), 1);  // a joiner that took ticket 1 and said nothing yet
  store->add(kNs + "/tickets", 1);
  store->set(kNs + "/2", "waiting");
  int64_t next = 1;
  EXPECT_TRUE(admit_joiners(*store, admit(2, 1), next).tickets.empty());
  EXPECT_EQ(next, 1);
  store->set(kNs + "/1", "waiting");
  const Admission a = admit_joiners(*store, admit(2, 1), next);
  EXPECT_EQ(a.tickets, (std::vector<int64_t>{1, 2}));
  int g = 0, r = 0;
  int64_t n = 0;
  ASSERT_TRUE(decode_admission(store->get_string(kNs + "/2"), g, r, n));
  EXPECT_EQ(r, 3);
}

TEST(GrowAgreement, AClosedLineRefusesJoinersAtOnceNamingTheGeneration) {
  auto store = make_hash_store();
  auto waiting = std::async(std::launch::async, [&] { return wait_for_admission(*store, joining(milliseconds(20000))); });
  std::this_thread::sleep_for(milliseconds(50));
  const auto closed_at = Clock::now();
  close_line(*store, kNs, 3);
  try {
    waiting.get();
    ADD_FAILURE() << "a joiner was admitted to a closed line";
  } catch (const ExcludedError& e) {
    EXPECT_EQ(e.generation(), 3);
    EXPECT_NE(std::string(e.what()).find("the group ended (generation 3 was shut down)"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(closed_at), 1.0);
  EXPECT_EQ(store->get_string(kNs + "/1"), "withdrawn");
  EXPECT_THROW(wait_for_admission(*store, joining(milliseconds(20000))), ExcludedError);
}

TEST(GrowAgreement, TheDeciderWaitsForAFirstJoinerWhenAsked) {
  auto store = make_hash_store();
  std::future<Admitted> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    late = std::async(std::launch::async, [&] { return wait_for_admission(*store, joining(milliseconds(10000))); });
  });
  const auto start = Clock::now();
  int64_t next = 1;
  const Admission a = admit_joiners(*store, admit(2, 1, 0, milliseconds(10000)), next);
  starter.join();
  EXPECT_EQ(a.tickets, std::vector<int64_t>{1});
  EXPECT_GE(seconds_since(start), 0.2);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(late.get().rank, 2);
  // Nobody else comes: the wait ends at its bound.
  const auto again = Clock::now();
  EXPECT_TRUE(admit_joiners(*store, admit(3, 2, 0, milliseconds(150)), next).tickets.empty());
  EXPECT_GE(seconds_since(again), 0.15);
}

}  // namespace
}  // namespace kolo::engine

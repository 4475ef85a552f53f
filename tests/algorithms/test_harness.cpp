// The in-process harness must catch the bugs it exists to catch: these "algorithms" are
// deliberately wrong, and each must fail the run with a message saying what went wrong.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "thread_comm.hpp"

namespace kolo::testing {
namespace {

using algo::Algorithm;
using algo::CollArgs;
using algo::CollKind;
using algo::Comm;
using Clock = std::chrono::steady_clock;

std::vector<CollArgs> ranks(int n) { return std::vector<CollArgs>(static_cast<size_t>(n)); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void waits_for_send_first(Comm& c) {  // both ranks wait for their send before receiving
  const int peer = 1 - c.rank();
  char out = 1, in = 0;
  c.wait(c.isend(peer, &out, 1));
  c.wait(c.irecv(peer, &in, 1));
}

TEST(Harness, ReportsADeadlockNamingTheAlgorithmWithinTheDeadline) {
  const Algorithm bad{.name = "waits_send_first", .wire_id = 250, .serves = {CollKind::allreduce}, .run = waits_for_send_first};
  const auto start = Clock::now();
  const std::string err = run_algorithm(bad, ranks(2), {.chunk_bytes = 64, .deadline = std::chrono::milliseconds(200)});
  EXPECT_TRUE(contains(err, "deadlock")) << err;
  EXPECT_TRUE(contains(err, "allreduce algorithm waits_send_first")) << err;
  EXPECT_TRUE(contains(err, "send #0 to rank")) << err;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST(Harness, TheSameExchangeDoneRightSucceedsAndDeliversTheData) {
  std::vector<char> got(2, 0);
  const Algorithm good{.name = "exchange", .wire_id = 250, .serves = {CollKind::allreduce}, .run = [](Comm& c) {
                         const int peer = 1 - c.rank();
                         char out = static_cast<char>(10 + c.rank());
                         algo::sendrecv(c, peer, &out, 1, peer, c.args().recv, 1);
                       }};
  std::vector<CollArgs> args = ranks(2);
  args[0].recv = &got[0];
  args[1].recv = &got[1];
  EXPECT_EQ(run_algorithm(good, args), "");
  EXPECT_EQ(got[0], 11);
  EXPECT_EQ(got[1], 10);
}

TEST(Harness, ReportsASizeMismatch) {
  const Algorithm bad{.name = "sizes", .wire_id = 250, .serves = {CollKind::allreduce}, .run = [](Comm& c) {
                        char buf[8] = {};
                        if (c.rank() == 0) c.wait(c.isend(1, buf, 4));
                        else c.wait(c.irecv(0, buf, 8));
                      }};
  const std::string err = run_algorithm(bad, ranks(2));
  EXPECT_TRUE(contains(err, "size mismatch")) << err;
  EXPECT_TRUE(contains(err, "4 bytes")) << err;
  EXPECT_TRUE(contains(err, "8 bytes")) << err;
}

TEST(Harness, ReportsAMessageNobodyReceived) {
  static char buf = 0;
  const Algorithm bad{.name = "orphan", .wire_id = 250, .serves = {CollKind::broadcast}, .run = [](Comm& c) {
                        if (c.rank() == 0) c.isend(1, &buf, 1);  // neither received nor waited
                      }};
  const std::string err = run_algorithm(bad, ranks(2));
  EXPECT_TRUE(contains(err, "never matched")) << err;
}

TEST(Harness, ReportsARequestNeverWaitedFor) {
  static char out = 0, in = 0;
  const Algorithm bad{.name = "forgets", .wire_id = 250, .serves = {CollKind::broadcast}, .run = [](Comm& c) {
                        if (c.rank() == 0) c.isend(1, &out, 1);
                        else c.wait(c.irecv(0, &in, 1));
                      }};
  const std::string err = run_algorithm(bad, ranks(2));
  EXPECT_TRUE(contains(err, "never waited")) << err;
}

TEST(Harness, RefusesMessagesToSelfAndOutsideTheGroup) {
  static char buf = 0;
  const Algorithm to_self{.name = "self", .wire_id = 250, .serves = {CollKind::broadcast}, .run = [](Comm& c) { c.wait(c.isend(c.rank(), &buf, 1)); }};
  EXPECT_TRUE(contains(run_algorithm(to_self, ranks(2)), "send to rank"));
  const Algorithm outside{.name = "outside", .wire_id = 250, .serves = {CollKind::broadcast}, .run = [](Comm& c) { c.wait(c.irecv(c.size(), &buf, 1)); }};
  EXPECT_TRUE(contains(run_algorithm(outside, ranks(3)), "receive from rank 3"));
}

TEST(Harness, RefusesAScratchSlotThatWouldMove) {
  const Algorithm bad{.name = "regrow", .wire_id = 250, .serves = {CollKind::allreduce}, .run = [](Comm& c) {
                        c.scratch(16, 2);
                        c.scratch(8, 2);  // fits: same memory, fine
                        c.scratch(32, 2);
                      }};
  const std::string err = run_algorithm(bad, ranks(1));
  EXPECT_TRUE(contains(err, "scratch slot 2")) << err;
}

TEST(Harness, OneRankFailingStopsTheOthersAtOnce) {
  const Algorithm bad{.name = "throws", .wire_id = 250, .serves = {CollKind::allreduce}, .run = [](Comm& c) {
                        char buf = 0;
                        if (c.rank() == 0) throw std::runtime_error("boom");
                        c.wait(c.irecv(0, &buf, 1));  // would wait for the full deadline otherwise
                      }};
  const auto start = Clock::now();
  const std::string err = run_algorithm(bad, ranks(4), {.chunk_bytes = 64, .deadline = std::chrono::milliseconds(5000)});
  EXPECT_TRUE(contains(err, "rank 0 threw: boom")) << err;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(Harness, ScratchSlotsDoNotOverlapAndAreAligned) {
  const Algorithm probe{.name = "probe", .wire_id = 250, .serves = {CollKind::allreduce}, .run = [](Comm& c) {
                          auto* a = static_cast<char*>(c.scratch(100, 0));
                          auto* b = static_cast<char*>(c.scratch(100, 1));
                          if (reinterpret_cast<uintptr_t>(a) % 64 || reinterpret_cast<uintptr_t>(b) % 64)
                            throw std::runtime_error("unaligned scratch");
                          if (a < b + 100 && b < a + 100) throw std::runtime_error("overlapping scratch");
                        }};
  EXPECT_EQ(run_algorithm(probe, ranks(1)), "");
}

}  // namespace
}  // namespace kolo::testing

// A group recycles the Works of operations whose caller is done with them (issue 12: the
// synchronous caller's next issue renews the last Work instead of building one;
// ProcessGroup::Impl::renew_spare). These tests hold Works while issuing more: a Work still held
// by its caller must never come back as another operation's, must keep its own sequence number
// and result, and the data of every operation must be right; Works the caller dropped (a send
// and a receive per step, the receive often queued before its message came) must be renewed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/spare_works.hpp"
#include "kolo/kolo.hpp"

using kolo::Buffer;
using kolo::WorkPtr;

namespace {

std::shared_ptr<kolo::ProcessGroup> group_of_one() {
  kolo::GroupOptions o;
  o.secret = "work-renewal-test";
  return kolo::ProcessGroup::create(kolo::make_hash_store(), 0, 1, o);
}

}  // namespace

TEST(WorkRenewal, AHeldWorkIsNeverHandedOutAgain) {
  auto g = group_of_one();
  float x = 0;
  struct Held {
    WorkPtr w;
    const kolo::Work* raw;
    uint64_t seq;
  };
  std::deque<Held> held;
  int renewed = 0;
  const kolo::Work* last_dropped = nullptr;
  for (int i = 0; i < 300; ++i) {
    WorkPtr w = (i % 3 == 0) ? g->broadcast(Buffer(&x, 1)) : g->allreduce(Buffer(&x, 1));
    w->wait();
    for (const Held& h : held) ASSERT_NE(w.get(), h.raw) << "call " << i << " got a Work its caller still holds";
    if (w.get() == last_dropped) ++renewed;
    EXPECT_EQ(w->op_name(), (i % 3 == 0) ? "broadcast" : "allreduce");
    if (!held.empty()) {
      EXPECT_GT(w->seq(), held.back().seq);
    }
    // Keep 0, 1, 2 or 3 Works, in a pattern that changes every 50 calls.
    const size_t keep = static_cast<size_t>((i / 50) % 4);
    held.push_back({w, w.get(), w->seq()});
    while (held.size() > keep) {
      last_dropped = held.front().raw;
      held.pop_front();
    }
    for (const Held& h : held) {
      EXPECT_EQ(h.w->seq(), h.seq) << "a held Work was rewritten";
      EXPECT_TRUE(h.w->is_success());
    }
  }
  EXPECT_GT(renewed, 0) << "no dropped Work was ever renewed";
  held.clear();
  g->shutdown();
}

TEST(WorkRenewal, ADroppedWorkIsRenewedWithItsNewOperation) {
  auto g = group_of_one();
  float x = 1;
  WorkPtr a = g->allreduce(Buffer(&x, 1));
  a->wait();
  const kolo::Work* raw = a.get();
  const uint64_t seq = a->seq();
  a.reset();
  WorkPtr b = g->broadcast(Buffer(&x, 1));
  EXPECT_EQ(b.get(), raw) << "the only Work, dropped, was not renewed";
  EXPECT_EQ(b->seq(), seq + 1);
  EXPECT_EQ(b->op_name(), "broadcast");
  b->wait();
  EXPECT_TRUE(b->is_success());
  g->shutdown();
}

TEST(WorkRenewal, ASynchronousCallerHoldsTheOnlyReference) {
  // The group keeps no reference to a Work it will renew (spare_works.hpp): the caller's is the
  // only one, so that its drop takes no atomic read-modify-write (libstdc++ drops a pointer whose
  // use and weak counts are both 1 with plain stores).
  auto g = group_of_one();
  float x = 0;
  int only = 0;
  for (int i = 0; i < 200; ++i) {
    WorkPtr w = (i % 2 == 0) ? g->allreduce(Buffer(&x, 1)) : g->broadcast(Buffer(&x, 1));
    w->wait();
    if (w.use_count() == 1) ++only;
  }
  // The engine thread may still hold an operation it ran for a moment after finishing it.
  EXPECT_GE(only, 190) << "the group (or the engine) kept a reference to synchronous callers' Works";
  g->shutdown();
}

TEST(WorkRenewal, ABatchIssuedBeforeItIsWaitedForIsRenewedBatchAfterBatch) {
  // A caller that issues a batch, then waits for it and drops it (torch's async_op, DDP's
  // buckets, kolo-perf -z 0) gets the batch's Works from the group's spare slots, renewed, up to
  // 1,024 in flight (spare_works.hpp), not new ones from the pool; and never one it still holds.
  // A held Work in a slot outlives its group as an orphan slot: that counts them.
  const size_t before = kolo::engine::SpareWorks::orphans();
  auto g = group_of_one();
  float x = 1.0f;
  std::vector<WorkPtr> works;
  for (size_t batch : {20, 7, 64, 90, 1100, 20, 40}) {
    works.clear();
    for (size_t i = 0; i < batch; ++i) {
      WorkPtr w = g->allreduce(Buffer(&x, 1));
      for (const WorkPtr& h : works) ASSERT_NE(w.get(), h.get()) << "a held Work was handed out again";
      works.push_back(std::move(w));
    }
    for (size_t i = 0; i < works.size(); ++i) {
      works[i]->wait();
      EXPECT_TRUE(works[i]->is_success());
      EXPECT_EQ(works[i]->seq(), works.front()->seq() + i) << "a held Work was rewritten";
      EXPECT_EQ(works[i].use_count(), 1) << "the group kept a reference to a batch's Work";
    }
  }
  g->shutdown();
  g.reset();
  EXPECT_EQ(kolo::engine::SpareWorks::orphans(), before + 40) << "the last batch of 40 did not come from spare slots";
  works.clear();
  EXPECT_EQ(kolo::engine::SpareWorks::orphans(), before);
}

TEST(WorkRenewal, AWorkOutlivesItsGroupAndIsFreedWhenDropped) {
  const size_t before = kolo::engine::SpareWorks::orphans();
  auto g = group_of_one();
  float x = 3;
  WorkPtr w = g->allreduce(Buffer(&x, 1));
  w->wait();
  const uint64_t seq = w->seq();
  g->shutdown();
  g.reset();
  // The group is gone; its Work is still the caller's, whole.
  EXPECT_EQ(kolo::engine::SpareWorks::orphans(), before + 1) << "the held Work's slot was not kept";
  EXPECT_TRUE(w->is_success());
  EXPECT_EQ(w->seq(), seq);
  EXPECT_EQ(w->op_name(), "allreduce");
  w->wait();
  w.reset();
  EXPECT_EQ(kolo::engine::SpareWorks::orphans(), before) << "the dropped Work's slot was not freed";
}

namespace {

// One rank of the two-rank exchange: per step a send and a receive in flight together, rank 1
// issuing its receive first (often before rank 0's message exists, so that it is queued and
// waited for), rank 0 its send first. Every step holds the last `kHeld` steps' Works. Returns ""
// or what went wrong.
std::string exchange_rank(const std::string& store_path, int rank) {
  constexpr int kSteps = 400;
  constexpr size_t kHeld = 2;
  kolo::GroupOptions o;
  o.transport = "shm";
  o.secret = "work-renewal-test";
  auto g = kolo::ProcessGroup::create(kolo::make_file_store(store_path), rank, 2, o);
  const int peer = 1 - rank;
  std::string wrong;
  struct Step {
    WorkPtr s, r;
    uint64_t s_seq, r_seq;
  };
  std::deque<Step> held;
  int renewed = 0;
  const kolo::Work* dropped[2] = {nullptr, nullptr};
  for (int i = 0; i < kSteps && wrong.empty(); ++i) {
    // The pattern changes halfway: first Works are held a while, then dropped at once.
    const size_t keep = i < kSteps / 2 ? kHeld : 0;
    float out = static_cast<float>(1000 * rank + i), in = -1;
    WorkPtr s, r;
    if (rank == 0) {
      s = g->send(Buffer(&out, 1), peer);
      r = g->recv(Buffer(&in, 1), peer);
    } else {
      r = g->recv(Buffer(&in, 1), peer);
      s = g->send(Buffer(&out, 1), peer);
    }
    s->wait();
    r->wait();
    const float expect = static_cast<float>(1000 * peer + i);
    if (in != expect) wrong = "step " + std::to_string(i) + ": received " + std::to_string(in) + ", expected " + std::to_string(expect);
    if (s.get() == r.get()) wrong = "step " + std::to_string(i) + ": the send and the receive share a Work";
    for (const Step& h : held) {
      if (s.get() == h.s.get() || s.get() == h.r.get() || r.get() == h.s.get() || r.get() == h.r.get())
        wrong = "step " + std::to_string(i) + ": a held Work was handed out again";
      if (h.s->seq() != h.s_seq || h.r->seq() != h.r_seq || !h.s->is_success() || !h.r->is_success())
        wrong = "step " + std::to_string(i) + ": a held Work was rewritten";
    }
    if (i > kSteps / 2)  // counted where every step drops both Works before the next
      for (const kolo::Work* d : dropped)
        if (d != nullptr && (s.get() == d || r.get() == d)) ++renewed;
    dropped[0] = dropped[1] = nullptr;
    held.push_back({s, r, s->seq(), r->seq()});
    if (held.size() > keep) {
      dropped[0] = held.front().s.get();
      dropped[1] = held.front().r.get();
      held.pop_front();
    }
    while (held.size() > keep) held.pop_front();
  }
  // In the second half every step drops both Works before the next: the send (done at issue)
  // is renewed every step, the receive whenever its message was there at issue (a receive that
  // was queued keeps its runner and is not renewed): close to one or more per step; the bound
  // leaves room for steps where a spare was still held.
  if (wrong.empty() && renewed < kSteps / 4)
    wrong = "rank " + std::to_string(rank) + ": only " + std::to_string(renewed) + " Works renewed in the last " +
            std::to_string(kSteps / 2) + " steps";
  held.clear();
  g->shutdown();
  return wrong;
}

}  // namespace

TEST(WorkRenewal, SendAndReceiveInFlightTogetherAreBothRenewedAndNeverShared) {
#if defined(__SANITIZE_THREAD__)
  // A forked partner of a ThreadSanitizer process dies before its first collective (as the
  // hot-path-allocations test's does): the group-of-one cases above run instrumented instead.
  GTEST_SKIP() << "forks a rank: not under ThreadSanitizer";
#endif
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kolo-work-renewal-" + std::to_string(getpid()))).string();
  std::filesystem::remove(path);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string f;
    try {
      f = exchange_rank(path, 1);
    } catch (const std::exception& e) {
      f = e.what();
    }
    if (!f.empty()) fprintf(stderr, "%s\n", f.c_str());
    _exit(f.empty() ? 0 : 1);
  }
  std::string f;
  try {
    f = exchange_rank(path, 0);
  } catch (const std::exception& e) {
    f = e.what();
  }
  EXPECT_EQ(f, "");
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1 failed (its stderr says)";
  std::filesystem::remove(path);
}

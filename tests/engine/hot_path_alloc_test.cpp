// Issue 12's first rule, checked: a collective the caller waits for allocates nothing once the
// group is warm. This binary replaces the global operator new to count every allocation of the
// process (the engine thread's too) while rank 0 issues and waits for 500 collectives of each
// kind; rank 1 is a forked process doing the same and counting its own. Warm-up first: the
// first calls size the pools (Works, request blocks, queues, scratch), which is allowed. The same
// holds for a subgroup that shares its parent's connections (SplitOptions.share_connections):
// its operations run on the parent's executor through a rank map, with no allocation either.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "kolo/kolo.hpp"

namespace {
std::atomic<long> g_allocations{0};
std::atomic<bool> g_counting{false};
}  // namespace

void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace {

constexpr int kWarmup = 300;
constexpr int kCounted = 500;

struct Case {
  const char* name;
  std::function<void(kolo::ProcessGroup&, std::vector<float>&, std::vector<float>&)> call;
};

std::vector<Case> cases() {
  using kolo::Buffer;
  return {
      {"allreduce", [](kolo::ProcessGroup& g, auto& a, auto&) { g.allreduce(Buffer(a.data(), 4))->wait(); }},
      {"allreduce-large", [](kolo::ProcessGroup& g, auto& a, auto&) { g.allreduce(Buffer(a.data(), a.size()))->wait(); }},
      {"broadcast", [](kolo::ProcessGroup& g, auto& a, auto&) { g.broadcast(Buffer(a.data(), 4))->wait(); }},
      {"reduce", [](kolo::ProcessGroup& g, auto& a, auto& b) { g.reduce(Buffer(a.data(), 4), Buffer(b.data(), 4))->wait(); }},
      {"allgather",
       [](kolo::ProcessGroup& g, auto& a, auto& b) {
         g.allgather(Buffer(a.data(), 4), Buffer(b.data(), 4 * static_cast<size_t>(g.size())))->wait();
       }},
      {"reduce_scatter",
       [](kolo::ProcessGroup& g, auto& a, auto& b) {
         g.reduce_scatter(Buffer(a.data(), 4 * static_cast<size_t>(g.size())), Buffer(b.data(), 4))->wait();
       }},
      {"barrier", [](kolo::ProcessGroup& g, auto&, auto&) { g.barrier()->wait(); }},
      // Point-to-point: a send to the next rank and a receive from the previous one, both in
      // flight together (a group of one has no peer: nothing to do).
      {"send+recv",
       [](kolo::ProcessGroup& g, auto& a, auto& b) {
         const int n = g.size(), r = g.rank();
         if (n == 1) return;
         auto s = g.send(Buffer(a.data(), 4), (r + 1) % n);
         auto q = g.recv(Buffer(b.data(), 4), (r + n - 1) % n);
         s->wait();
         q->wait();
       }},
  };
}

// Runs every case on this rank; returns "" or what allocated.
std::string run_rank(const std::string& store_path, int rank, int size, const std::string& transport, bool sharing) {
  kolo::GroupOptions o;
  o.transport = transport;
  o.secret = "hot-path-test";
  auto world = kolo::ProcessGroup::create(kolo::make_file_store(store_path), rank, size, o);
  std::shared_ptr<kolo::ProcessGroup> g = world;
  if (sharing) {
    kolo::SplitOptions so;
    so.share_connections = true;
    g = world->split(0, -rank, so);  // every rank, in reverse order: each peer goes through the map
  }
  std::vector<float> a(1 << 16, 1.0f), b(1 << 16, 0.0f);
  std::string failures;
  for (const Case& c : cases()) {
    for (int i = 0; i < kWarmup; ++i) c.call(*g, a, b);
    g_allocations = 0;
    g_counting = true;
    for (int i = 0; i < kCounted; ++i) c.call(*g, a, b);
    g_counting = false;
    const long n = g_allocations.load();
    if (n != 0)
      failures += "rank " + std::to_string(rank) + " " + c.name + ": " + std::to_string(n) + " allocations in " +
                  std::to_string(kCounted) + " calls; ";
  }
  g->shutdown();
  world->shutdown();
  return failures;
}

void expect_no_allocations(int size, const std::string& transport, bool sharing = false) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kolo-hot-path-" + std::to_string(getpid()) + "-" + transport + std::to_string(size)))
                               .string();
  std::filesystem::remove(path);
  std::vector<pid_t> children;
  for (int r = 1; r < size; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string f;
      try {
        f = run_rank(path, r, size, transport, sharing);
      } catch (const std::exception& e) {
        f = e.what();
      }
      if (!f.empty()) fprintf(stderr, "%s\n", f.c_str());
      _exit(f.empty() ? 0 : 1);
    }
    children.push_back(pid);
  }
  EXPECT_EQ(run_rank(path, 0, size, transport, sharing), "");
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a forked rank allocated or failed (its stderr says)";
  }
  std::filesystem::remove(path);
}

TEST(HotPathAllocations, NoneForAGroupOfOne) { expect_no_allocations(1, ""); }
TEST(HotPathAllocations, NoneOverSharedMemory) { expect_no_allocations(2, "shm"); }
TEST(HotPathAllocations, NoneOverTcp) { expect_no_allocations(2, "tcp"); }
TEST(HotPathAllocations, NoneAtFourRanksOverSharedMemory) { expect_no_allocations(4, "shm"); }
TEST(HotPathAllocations, NoneForASharingSubgroupOverTcp) { expect_no_allocations(2, "tcp", true); }
TEST(HotPathAllocations, NoneForASharingSubgroupAtFourRanksOverSharedMemory) { expect_no_allocations(4, "shm", true); }

// The counter itself works (else the tests above prove nothing).
TEST(HotPathAllocations, CounterSeesAnAllocation) {
  g_allocations = 0;
  g_counting = true;
  auto* p = new std::string(100, 'x');
  g_counting = false;
  delete p;
  EXPECT_GE(g_allocations.load(), 1);
}

}  // namespace

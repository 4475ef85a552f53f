// The host half of the cuda_ipc handshake (transports/cuda_ipc/host_flags.hpp), which needs no
// GPU: two ranks as threads of one process sharing an in-process store, each mapping the
// segment as a separate process would.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "transports/cuda_ipc/host_flags.hpp"

namespace {

using kolo::cuda_ipc::HostFlags;
using namespace std::chrono_literals;

// Both ranks' HostFlags, built concurrently (the constructor is collective).
struct Pair {
  std::shared_ptr<kolo::Store> store = kolo::make_hash_store();
  std::unique_ptr<HostFlags> r0, r1;
  explicit Pair(std::chrono::milliseconds timeout = 5s) {
    std::thread t([&] { r1 = std::make_unique<HostFlags>(*store, "t", 1, 2, timeout); });
    r0 = std::make_unique<HostFlags>(*store, "t", 0, 2, timeout);
    t.join();
  }
};

TEST(CudaIpcHostFlags, SegmentIsUnlinkedOnceEveryRankMappedIt) {
  Pair p;
  const std::string name = p.store->get_string("t/shm");
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + name)) << name;
}

TEST(CudaIpcHostFlags, PublishedPhaseAndDescriptorReachThePeer) {
  Pair p;
  p.r0->my_desc().count = 1000003;
  p.r0->my_desc().gen_in = 7;
  std::thread t([&] { p.r0->publish(kolo::cuda_ipc::kReady, 1); });
  p.r1->wait(0, kolo::cuda_ipc::kReady, 1);
  t.join();
  EXPECT_EQ(p.r1->desc(0).count, 1000003u);
  EXPECT_EQ(p.r1->desc(0).gen_in, 7u);
  // Phases are independent, and a later number satisfies an earlier wait.
  p.r0->publish(kolo::cuda_ipc::kDone, 5);
  p.r1->wait(0, kolo::cuda_ipc::kDone, 3);
}

TEST(CudaIpcHostFlags, WaitGivesUpAfterTheTimeoutNamingThePeer) {
  Pair p(200ms);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    p.r1->wait(0, kolo::cuda_ipc::kMid, 1);
    FAIL() << "no timeout";
  } catch (const kolo::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(CudaIpcHostFlags, WaitEndsEarlyWhenTheStopCheckSaysTheGroupFailed) {
  // The engine's group learns of a dead peer from its connections; a wait for that peer here
  // must end then, not at the timeout (a minute).
  Pair p(60s);
  std::atomic<bool> failed{false};
  p.r1->set_stop_check([&] { return failed ? std::string("the group has failed") : std::string(); });
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    failed = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  try {
    p.r1->wait(0, kolo::cuda_ipc::kReady, 1);
    ADD_FAILURE() << "the wait returned without the peer";
  } catch (const kolo::TimeoutError& e) {
    ADD_FAILURE() << "timed out instead of stopping: " << e.what();
  } catch (const kolo::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the group has failed"), std::string::npos) << e.what();
  }
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

// A peer whose call failed before it published (it throws and leaves the collective) must not
// hold the others for the whole timeout: its engine group may be idle and never tell them.
TEST(CudaIpcHostFlags, WaitEndsAtOnceWhenThePeerMarksItselfFailed) {
  Pair p(60s);
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    p.r0->mark_failed();
  });
  const auto t0 = std::chrono::steady_clock::now();
  try {
    p.r1->wait(0, kolo::cuda_ipc::kReady, 1);
    ADD_FAILURE() << "the wait returned without the peer";
  } catch (const kolo::PeerError& e) {
    EXPECT_EQ(e.peer_rank(), 0) << e.what();
    EXPECT_NE(std::string(e.what()).find("its call failed"), std::string::npos) << e.what();
  } catch (const kolo::Error& e) {
    ADD_FAILURE() << "not a PeerError: " << e.what();
  }
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

// A peer process killed outright (SIGKILL, a crash) marks nothing: its pid says it is gone.
TEST(CudaIpcHostFlags, WaitEndsWhenThePeerProcessIsGone) {
  const std::string dir = ::testing::TempDir() + "/kolo-hostflags-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const pid_t child = ::fork();
  if (child == 0) {
    // Rank 0 in another process: maps the segment, then dies without a word.
    try {
      auto store = kolo::make_file_store(dir + "/store", 2);
      HostFlags r0(*store, "t", 0, 2, 20s);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  auto store = kolo::make_file_store(dir + "/store", 2);
  HostFlags r1(*store, "t", 1, 2, 60s);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r1.wait(0, kolo::cuda_ipc::kReady, 1);
    ADD_FAILURE() << "the wait returned without the peer";
  } catch (const kolo::PeerError& e) {
    EXPECT_EQ(e.peer_rank(), 0) << e.what();
    EXPECT_NE(std::string(e.what()).find("exited"), std::string::npos) << e.what();
  } catch (const kolo::Error& e) {
    ADD_FAILURE() << "not a PeerError: " << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  std::filesystem::remove_all(dir);
}

TEST(CudaIpcHostFlags, RetiredGenerationsReachThePeerInOrder) {
  Pair p;
  for (uint64_t g = 1; g <= 300; ++g) p.r0->retire(g);
  const uint64_t n = p.r1->retired_count(0);
  ASSERT_EQ(n, 300u);
  // The ring keeps the last kRetireRing entries (a peer further behind closes everything).
  for (uint64_t i = n - kolo::cuda_ipc::kRetireRing; i < n; ++i) EXPECT_EQ(p.r1->retired_at(0, i), i + 1);
}

TEST(CudaIpcHostFlags, RefusesMoreRanksThanTheSegmentHolds) {
  auto store = kolo::make_hash_store();
  EXPECT_THROW(HostFlags(*store, "t", 0, 9, 1s), kolo::InvalidArgument);
}

}  // namespace

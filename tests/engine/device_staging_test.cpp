// The pinned blocks of device staging (src/engine/device_staging.hpp) without a GPU: a runtime
// whose host allocations are counted and whose events complete when the test says so.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <thread>

#include "engine/device_staging.hpp"
#include "quiet_runtime.hpp"

namespace {

using namespace std::chrono_literals;

// Host allocations counted; events are flags the test raises (new ones, the destructor's
// drain, start done).
class CountingRuntime : public kolo::testing::QuietRuntime {
 public:
  const char* name() const override { return "counting"; }
  void* alloc_host(size_t bytes) override {
    ++pinned;
    return std::calloc(1, bytes);
  }
  void free_host(void* p) override { std::free(p); }
  void* create_event() override { return &events.emplace_back(true); }
  bool done(void* e) override { return static_cast<std::atomic<bool>*>(e)->load(); }

  std::atomic<int> pinned{0};
  std::deque<std::atomic<bool>> events;
};

// Back-to-back large operations: the next one's block is the one whose copies end a few
// milliseconds later, not a newly pinned one (pinning 64 MiB took 41 ms on an H200 host).
TEST(DeviceStagingBlocks, ABlockStillInFlightIsWaitedForRatherThanPinnedAgain) {
  CountingRuntime rt;
  kolo::engine::DeviceStaging staging(rt, 0, 256 << 20);
  const size_t bytes = 32 << 20;
  const int pinned_at_start = rt.pinned;
  kolo::engine::DeviceStaging::Block first = staging.take_block(bytes);
  ASSERT_EQ(rt.pinned, pinned_at_start + 1);
  std::atomic<bool>& copies_done = rt.events.emplace_back(false);
  staging.give_back(first, &copies_done, nullptr, {});
  std::thread gpu([&] {
    std::this_thread::sleep_for(5ms);
    copies_done = true;
  });
  kolo::engine::DeviceStaging::Block second = staging.take_block(bytes);
  gpu.join();
  EXPECT_EQ(second.host, first.host);
  EXPECT_EQ(rt.pinned, pinned_at_start + 1) << "a second block was pinned while the first was 5 ms from free";
  staging.give_back(second, nullptr, nullptr, {});
}

// A block whose copies never end (a stream stuck behind user work) is not waited for beyond
// what pinning costs: the operation pins its own and goes on.
TEST(DeviceStagingBlocks, ABlockThatNeverComesBackIsWaitedForBoundedly) {
  CountingRuntime rt;
  kolo::engine::DeviceStaging staging(rt, 0, 256 << 20);
  const size_t bytes = 4 << 20;
  kolo::engine::DeviceStaging::Block stuck = staging.take_block(bytes);
  std::atomic<bool>& never = rt.events.emplace_back(false);
  staging.give_back(stuck, &never, nullptr, {});
  const auto t0 = std::chrono::steady_clock::now();
  kolo::engine::DeviceStaging::Block other = staging.take_block(bytes);
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(other.host, stuck.host);
  EXPECT_LT(waited, 1s);
  staging.give_back(other, nullptr, nullptr, {});
  never = true;  // lets the destructor free it
}

}  // namespace

// Context's pair look-up after a hand-over (src/engine/context.hpp, forget_pair): a connection a
// shrink gave to the new group must not be reachable through the old group's context, whose
// fast look-up kept a pointer to it.
#include <gtest/gtest.h>

#include <memory>

#include "engine/context.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {
namespace {

class NullPair final : public transport::Pair {
 public:
  void post_send(const void*, size_t, const transport::Tag&, transport::Request*) override {}
  void post_recv(void*, size_t, const transport::Tag&, transport::Request*) override {}
  bool peek_incoming(transport::Tag*, uint64_t*) override { return false; }
};

// A device whose pairs are fixed (as shm's and eager tcp's), one of which can leave it.
class FixedDevice final : public transport::Device {
 public:
  std::unique_ptr<NullPair> pair_to_1 = std::make_unique<NullPair>();
  const char* name() const override { return "fixed"; }
  transport::Pair* pair(int peer) override { return peer == 1 ? pair_to_1.get() : nullptr; }
  bool poll() override { return false; }
  int wait_fd() const override { return -1; }
  bool pairs_fixed() const override { return true; }
  void abort(const std::string&) override {}
  std::vector<int> close(std::chrono::steady_clock::time_point) override { return {}; }
};

TEST(ContextPairs, AHandedOverPairIsNotReachedAnyMore) {
  Context ctx(0, 2);
  auto dev = std::make_unique<FixedDevice>();
  FixedDevice* d = dev.get();
  ctx.add_device(std::move(dev), {1});
  EXPECT_EQ(&ctx.pair(1), d->pair_to_1.get());
  // The hand-over: the pair leaves the device for the new group's, and the context forgets it.
  auto moved = std::move(d->pair_to_1);
  ctx.forget_pair(1);
  EXPECT_THROW(ctx.pair(1), Error) << "the old context still reached a pair it gave away";
}

}  // namespace
}  // namespace kolo::engine

// The cuda_ipc pair device's own paths (transports/cuda_ipc/ipc_pair_device.hpp), beyond the
// transport conformance suite that it also runs (tests/transports): on the host stand-in of
// device memory, two ranks as threads, no GPU needed. The registration cache under the pair (a
// large message's buffer exported once and mapped once however often it is sent; deregistered or
// freed and reallocated, the peer closes its mapping and maps the new allocation, never reading
// the old), the staging ring (full: later small sends wait for the receiver, then all complete
// in order), a large send held until the receiver has copied it, no copy left running into a
// failed request's buffer, and a buffer that is not device memory refused naming the peer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kolo/store.hpp"
#include "transports/cuda_ipc/ipc_pair_device.hpp"
#include "transports/cuda_ipc/standin_memory.hpp"
#include "failure_recorder.hpp"

namespace {

using namespace std::chrono_literals;
using kolo::cuda_ipc::IpcMemory;
using kolo::cuda_ipc::IpcPairDevice;
using kolo::transport::Failure;
using kolo::transport::Request;
using kolo::transport::Tag;
using Clock = std::chrono::steady_clock;

IpcMemory& mem() { return kolo::cuda_ipc::standin_memory(); }

struct Two {
  std::shared_ptr<kolo::Store> store = kolo::make_hash_store();
  kolo::testing::FailureRecorder sink[2];
  std::unique_ptr<IpcPairDevice> dev[2];
  Two() {
    std::thread t([&] { dev[1] = IpcPairDevice::connect(mem(), boot(1), {0}); });
    dev[0] = IpcPairDevice::connect(mem(), boot(0), {1});
    t.join();
  }
  kolo::transport::Bootstrap boot(int rank) {
    kolo::transport::Bootstrap b;
    b.store = store.get();
    b.prefix = "pair";
    b.rank = rank;
    b.size = 2;
    b.secret.fill(3);
    b.deadline = Clock::now() + 10s;
    b.host_ids = {"h", "h"};
    b.failures = &sink[rank];
    return b;
  }
  // Polls both devices until none of `reqs` is pending (fails the test after 10 s).
  void drive(std::vector<Request*> reqs) {
    const auto deadline = Clock::now() + 10s;
    for (;;) {
      bool pending = false;
      for (Request* r : reqs) pending |= r->state == Request::State::pending;
      if (!pending) return;
      ASSERT_LT(Clock::now(), deadline) << "requests did not complete";
      dev[0]->poll();
      dev[1]->poll();
    }
  }
  void poll_both(int times) {
    for (int i = 0; i < times; ++i) {
      dev[0]->poll();
      dev[1]->poll();
    }
  }
};

Tag tag(uint64_t v) {
  Tag t;
  t.w[0] = v;
  t.w[2] = ~v;
  return t;
}

// A device buffer holding `fill` in every byte.
void* device_bytes(size_t n, uint8_t fill) {
  void* p = mem().allocate(n);
  std::vector<uint8_t> h(n, fill);
  mem().to_device(p, h.data(), n);
  return p;
}

bool holds(const void* dev, size_t n, uint8_t fill) {
  std::vector<uint8_t> h(n);
  mem().to_host(h.data(), dev, n);
  for (uint8_t b : h)
    if (b != fill) return false;
  return true;
}

constexpr size_t kLarge = IpcPairDevice::kEagerMaxBytes * 4;

TEST(CudaIpcPair, LargeBufferIsExportedOnceAndMappedOnceHoweverOftenSent) {
  Two t;
  const uint64_t exports_before = t.dev[0]->cache().exports();  // the staging ring's
  void* src = device_bytes(kLarge, 0);
  void* dst = mem().allocate(kLarge);
  for (int i = 1; i <= 5; ++i) {
    std::vector<uint8_t> h(kLarge, static_cast<uint8_t>(i));
    mem().to_device(src, h.data(), kLarge);
    Request s, r;
    t.dev[0]->pair(1)->post_send(src, kLarge, tag(i), &s);
    t.dev[1]->pair(0)->post_recv(dst, kLarge, tag(i), &r);
    t.drive({&s, &r});
    ASSERT_EQ(s.state, Request::State::done) << s.detail;
    ASSERT_EQ(r.state, Request::State::done) << r.detail;
    EXPECT_TRUE(holds(dst, kLarge, static_cast<uint8_t>(i))) << "message " << i;
  }
  EXPECT_EQ(t.dev[0]->cache().exports(), exports_before + 1);
  EXPECT_EQ(t.dev[1]->mappings().open_count(), 1u);
  mem().release(src);
  mem().release(dst);
}

TEST(CudaIpcPair, DeregisteredBufferIsUnmappedByThePeer) {
  Two t;
  void* src = device_bytes(kLarge, 7);
  void* dst = mem().allocate(kLarge);
  Request s, r;
  t.dev[0]->pair(1)->post_send(src, kLarge, tag(1), &s);
  t.dev[1]->pair(0)->post_recv(dst, kLarge, tag(1), &r);
  t.drive({&s, &r});
  ASSERT_EQ(t.dev[1]->mappings().open_count(), 1u);
  EXPECT_TRUE(t.dev[0]->deregister(src));
  const auto deadline = Clock::now() + 5s;
  while (t.dev[1]->mappings().open_count() != 0 && Clock::now() < deadline) t.poll_both(1);
  EXPECT_EQ(t.dev[1]->mappings().open_count(), 0u) << "the peer kept its mapping of a retired registration";
  EXPECT_EQ(t.sink[0].why, Failure::none);
  EXPECT_EQ(t.sink[1].why, Failure::none) << t.sink[1].detail;
  mem().release(src);
  mem().release(dst);
}

// Freed and reallocated at the same address: a new export, the peer maps the new one (the
// stand-in refuses to open a handle of a freed allocation, as CUDA does) and gets the new bytes.
TEST(CudaIpcPair, ReallocatedBufferIsExportedAfresh) {
  Two t;
  void* dst = mem().allocate(kLarge);
  void* src = device_bytes(kLarge, 1);
  Request s1, r1;
  t.dev[0]->pair(1)->post_send(src, kLarge, tag(1), &s1);
  t.dev[1]->pair(0)->post_recv(dst, kLarge, tag(1), &r1);
  t.drive({&s1, &r1});
  const uint64_t exports = t.dev[0]->cache().exports();
  mem().release(src);
  // First fit: holes left lower in the arena by earlier cases fill up first, then src's comes back.
  std::vector<void*> fillers;
  void* again = nullptr;
  for (int i = 0; i < 256 && again != src; ++i) {
    if (again != nullptr) fillers.push_back(again);
    again = mem().allocate(kLarge);
  }
  ASSERT_EQ(again, src) << "the stand-in did not reuse the address: the case tests nothing";
  for (void* f : fillers) mem().release(f);
  {
    std::vector<uint8_t> h(kLarge, 2);
    mem().to_device(again, h.data(), kLarge);
  }
  Request s2, r2;
  t.dev[0]->pair(1)->post_send(again, kLarge, tag(2), &s2);
  t.dev[1]->pair(0)->post_recv(dst, kLarge, tag(2), &r2);
  t.drive({&s2, &r2});
  ASSERT_EQ(r2.state, Request::State::done) << r2.detail;
  EXPECT_TRUE(holds(dst, kLarge, 2));
  EXPECT_EQ(t.dev[0]->cache().exports(), exports + 1);
  EXPECT_EQ(t.dev[1]->mappings().open_count(), 1u);
  mem().release(again);
  mem().release(dst);
}

// A large send is read from the sender's buffer: it completes only once the receiver has.
TEST(CudaIpcPair, LargeSendIsHeldUntilTheReceiverCopiedIt) {
  Two t;
  void* src = device_bytes(kLarge, 9);
  void* dst = mem().allocate(kLarge);
  Request s, r;
  t.dev[0]->pair(1)->post_send(src, kLarge, tag(1), &s);
  t.poll_both(200);
  EXPECT_EQ(s.state, Request::State::pending) << "a large send completed with no receive posted";
  t.dev[1]->pair(0)->post_recv(dst, kLarge, tag(1), &r);
  t.drive({&s, &r});
  EXPECT_EQ(s.state, Request::State::done);
  EXPECT_TRUE(holds(dst, kLarge, 9));
  mem().release(src);
  mem().release(dst);
}

// More small messages than the ring holds: the first ones complete at once, the rest wait for
// the receiver to take some; all arrive, in order.
TEST(CudaIpcPair, FullStagingRingMakesSendsWait) {
  Two t;
  constexpr size_t kMsg = IpcPairDevice::kEagerMaxBytes;
  constexpr int kCount = 2 * static_cast<int>(IpcPairDevice::kRingBytes / kMsg);
  std::vector<void*> src, dst;
  std::vector<Request> s(kCount), r(kCount);
  for (int i = 0; i < kCount; ++i) {
    src.push_back(device_bytes(kMsg, static_cast<uint8_t>(i + 1)));
    dst.push_back(mem().allocate(kMsg));
    t.dev[0]->pair(1)->post_send(src.back(), kMsg, tag(i), &s[i]);
  }
  t.poll_both(500);
  int done = 0;
  for (const Request& q : s) done += q.state == Request::State::done;
  EXPECT_GT(done, 0);
  EXPECT_LE(done, static_cast<int>(IpcPairDevice::kRingBytes / kMsg)) << "more staged than the ring holds";
  std::vector<Request*> all;
  for (int i = 0; i < kCount; ++i) {
    t.dev[1]->pair(0)->post_recv(dst[i], kMsg, tag(i), &r[i]);
    all.push_back(&s[i]);
    all.push_back(&r[i]);
  }
  t.drive(all);
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(r[i].state, Request::State::done) << "message " << i << ": " << r[i].detail;
    EXPECT_TRUE(holds(dst[i], kMsg, static_cast<uint8_t>(i + 1))) << "message " << i;
  }
  for (void* p : src) mem().release(p);
  for (void* p : dst) mem().release(p);
}

// A failed request's buffer is the caller's again: a copy into it that was still in flight when
// the pair aborted has finished by then, and nothing writes it afterwards (the stand-in runs a
// copy only when it is reported complete, or when its queue is drained or destroyed).
TEST(CudaIpcPair, NoCopyTouchesABufferAfterItsRequestFailed) {
  Two t;
  void* src = device_bytes(kLarge, 4);
  void* dst = device_bytes(kLarge, 0);
  Request s, r;
  t.dev[0]->pair(1)->post_send(src, kLarge, tag(1), &s);
  Tag got;
  uint64_t got_bytes = 0;
  const auto deadline = Clock::now() + 5s;
  while (!t.dev[1]->pair(0)->peek_incoming(&got, &got_bytes) && Clock::now() < deadline) t.poll_both(1);
  ASSERT_EQ(got_bytes, kLarge);
  t.dev[1]->pair(0)->post_recv(dst, kLarge, tag(1), &r);  // starts the copy, not yet complete
  ASSERT_EQ(r.state, Request::State::pending);
  t.dev[1]->abort("test gives up");
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::aborted);
  std::vector<uint8_t> mine(kLarge, 0x5a);
  mem().to_device(dst, mine.data(), kLarge);  // the caller reuses its buffer
  t.poll_both(10);
  t.dev[1].reset();
  EXPECT_TRUE(holds(dst, kLarge, 0x5a)) << "a copy of the failed receive wrote its buffer afterwards";
  mem().release(src);
  mem().release(dst);
}

TEST(CudaIpcPair, HostBufferIsRefusedNamingThePeer) {
  Two t;
  std::vector<uint8_t> host(100, 1);
  Request s;
  t.dev[0]->pair(1)->post_send(host.data(), host.size(), tag(1), &s);
  ASSERT_EQ(s.state, Request::State::failed);
  EXPECT_EQ(s.failure, Failure::io_error);
  EXPECT_NE(s.detail.find("rank 1"), std::string::npos) << s.detail;
  EXPECT_NE(s.detail.find("not device memory"), std::string::npos) << s.detail;
  EXPECT_EQ(t.sink[0].peer, 1);
}

}  // namespace

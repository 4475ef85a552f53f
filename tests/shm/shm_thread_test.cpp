// The shared-memory transport with threads as ranks (each with its own device and segment):
// bytes intact at every size and ring geometry, order through ring wraps, size mismatches on the
// ring and the cross-memory-attach paths, doorbells that wake a sleeping receiver or sender, an
// idle device that really sleeps, and clear errors for a full /dev/shm. What every transport must
// do (matching, dead peers, aborts, close, a wrong secret) is the conformance suite's
// (tests/transports).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sched.h>

#include <cstring>
#include <thread>

#include "kolo/error.hpp"
#include "shm_test_support.hpp"
#include "transports/shm/shm_device.hpp"
#include "transports/shm/shm_fence.hpp"
#include "transports/shm/shm_pair.hpp"
#include "transports/shm/shm_layout.hpp"

using namespace kolo;
using namespace kolo::shmtest;

namespace {

class ShmThreads : public ::testing::Test {
 protected:
  void SetUp() override { job_id(); }
  // Every segment is unlinked once the peers attached: nothing may be left, whatever happened.
  void TearDown() override {
    auto left = leftover_segments();
    EXPECT_TRUE(left.empty()) << left.size() << " leftover segment(s), first: " << (left.empty() ? "" : left[0]);
  }
};

// Rank 0 and rank 1 each send every size to the other (all posted at once) and check what
// arrives against an independently generated pattern.
void expect_every_size_intact(const std::vector<size_t>& sizes) {
  auto ranks = connect_all(2);
  const std::vector<std::string> errors = shmtest::exchange_every_size(ranks, sizes, 20s);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(ranks[0]->sink.first(), Failure::none) << ranks[0]->sink.detail;
  EXPECT_EQ(ranks[1]->sink.first(), Failure::none) << ranks[1]->sink.detail;
}

}  // namespace

TEST_F(ShmThreads, BytesArriveIntactAtEverySize) { expect_every_size_intact(boundary_sizes()); }

TEST_F(ShmThreads, BytesArriveIntactThroughTheRingAlone) {
  // No cross-memory attach: large messages are pipelined through the slots.
  ScopedEnv cma("KOLO_SHM_CMA_MIN_BYTES", "0");
  expect_every_size_intact(boundary_sizes());
}

TEST_F(ShmThreads, BytesArriveIntactThroughATinyRing) {
  // Two slots of 64 payload bytes: nearly every message wraps the ring and waits for room.
  ScopedEnv slot("KOLO_SHM_SLOT_BYTES", "128");
  ScopedEnv slots("KOLO_SHM_SLOTS", "2");
  ScopedEnv cma("KOLO_SHM_CMA_MIN_BYTES", "0");
  expect_every_size_intact({0, 1, 63, 64, 65, 127, 128, 129, 4095, 100000});
}

// One thread polls the receiver and the sender of two large messages in turn (the receiver reads
// one piece per poll): the sender, waiting for the read, writes pieces of its own, so both copy,
// and every byte lands where it belongs. The second message checks that claims name their
// message (the counters start again). With KOLO_SHM_CMA_HELP=0 the receiver copies alone.
void large_messages_copied_by_both(bool help) {
  ScopedEnv env("KOLO_SHM_CMA_HELP", help ? "1" : "0");
  auto ranks = connect_all(2);
  auto& tx = *ranks[0]->dev;
  auto& rx = *ranks[1]->dev;
  const std::vector<size_t> sizes{(size_t{16} << 20) + 7, (size_t{2} << 20) + 1};
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<Request> sreq(sizes.size()), rreq(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back(pattern(sizes[i], 900 + i));
    in.emplace_back(sizes[i], 0xEE);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    tx.pair(1)->post_send(out[i].data(), sizes[i], tag(300 + i), &sreq[i]);
    rx.pair(0)->post_recv(in[i].data(), sizes[i], tag(300 + i), &rreq[i]);
  }
  const auto until = Clock::now() + 20s;
  auto pending = [&] {
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sreq[i].state == Request::State::pending || rreq[i].state == Request::State::pending) return true;
    return false;
  };
  while (pending() && Clock::now() < until) {
    rx.poll();
    tx.poll();
  }
  uint64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    total += sizes[i];
    ASSERT_EQ(sreq[i].state, Request::State::done) << sreq[i].detail;
    ASSERT_EQ(rreq[i].state, Request::State::done) << rreq[i].detail;
    EXPECT_TRUE(in[i] == pattern(sizes[i], 900 + i)) << "message " << i << " of " << sizes[i] << " bytes differs";
  }
  const uint64_t helped = static_cast<shm::ShmPair*>(tx.pair(1))->helped_bytes();
  if (help) {
    // Taking turns, the sender claims about every other piece of each message.
    EXPECT_GE(helped, total / 4) << "the sender wrote " << helped << " of " << total << " bytes";
    EXPECT_LT(helped, total) << "the receiver read nothing itself";
  } else {
    EXPECT_EQ(helped, 0u);
  }
}

TEST_F(ShmThreads, LargeMessagesAreCopiedByTheWaitingSenderToo) { large_messages_copied_by_both(true); }
TEST_F(ShmThreads, LargeMessagesAreCopiedByTheReceiverAloneWithoutHelp) { large_messages_copied_by_both(false); }

// A receiver that fails in the middle of a large message hands its buffer back to the user: from
// then on the sender must not write into it. The receiver reads piece 0, the sender writes piece
// 1, the receiver aborts; the sender's next poll (before it has read the abort notice) must
// claim nothing more.
TEST_F(ShmThreads, ReceiverThatFailsMidMessageStopsTheSendersPieces) {
  auto ranks = connect_all(2);
  auto& tx = *ranks[0]->dev;
  auto& rx = *ranks[1]->dev;
  const size_t bytes = size_t{8} << 20;
  auto out = pattern(bytes, 41);
  std::vector<uint8_t> in(bytes, 0xEE);
  Request s, r;
  tx.pair(1)->post_send(out.data(), bytes, tag(7), &s);
  rx.pair(0)->post_recv(in.data(), bytes, tag(7), &r);
  auto* sender = static_cast<shm::ShmPair*>(tx.pair(1));
  rx.poll();  // takes the message, reads piece 0
  tx.poll();  // writes piece 1
  ASSERT_EQ(sender->helped_bytes(), shm::kRemotePieceBytes) << "the sender did not write the second piece";
  rx.abort("test: the receiver gives up");
  EXPECT_EQ(r.state, Request::State::failed);
  const std::vector<uint8_t> at_abort = in;
  for (int i = 0; i < 3; ++i) tx.poll();
  EXPECT_EQ(sender->helped_bytes(), shm::kRemotePieceBytes) << "the sender wrote pieces after the receiver failed";
  EXPECT_TRUE(in == at_abort) << "the receive buffer changed after the receive failed";
}

TEST_F(ShmThreads, ManyMessagesMatchInPostingOrder) {
  // Far more messages than slots, all posted before any is received.
  ScopedEnv slots("KOLO_SHM_SLOTS", "4");
  auto ranks = connect_all(2);
  constexpr int kCount = 500;
  std::vector<uint64_t> out(kCount), in(kCount, 0);
  std::vector<Request> s(kCount), r(kCount);
  std::vector<Request*> sp, rp;
  for (int i = 0; i < kCount; ++i) {
    out[static_cast<size_t>(i)] = 0xABCD0000u + static_cast<uint64_t>(i) * 7;
    ranks[0]->dev->pair(1)->post_send(&out[static_cast<size_t>(i)], 8, tag(static_cast<uint64_t>(i)), &s[static_cast<size_t>(i)]);
    sp.push_back(&s[static_cast<size_t>(i)]);
  }
  std::thread sender([&] { EXPECT_TRUE(drive(*ranks[0]->dev, sp).finished); });
  for (int i = 0; i < kCount; ++i) {
    ranks[1]->dev->pair(0)->post_recv(&in[static_cast<size_t>(i)], 8, tag(static_cast<uint64_t>(i)), &r[static_cast<size_t>(i)]);
    rp.push_back(&r[static_cast<size_t>(i)]);
  }
  EXPECT_TRUE(drive(*ranks[1]->dev, rp).finished);
  sender.join();
  EXPECT_EQ(in, out);
  EXPECT_EQ(ranks[1]->sink.first(), Failure::none) << ranks[1]->sink.detail;
}

TEST_F(ShmThreads, ReceivePostedAfterArrivalStillMatches) {
  auto ranks = connect_all(2);
  for (size_t bytes : {size_t(4000), size_t(200000)}) {  // in the ring; described for a remote read
    auto data = pattern(bytes, 9);
    Request s;
    ranks[0]->dev->pair(1)->post_send(data.data(), bytes, tag(9), &s);
    // Let the message arrive (or its description) before any receive exists.
    for (int i = 0; i < 20; ++i) {
      ranks[0]->dev->poll();
      ranks[1]->dev->poll();
    }
    std::vector<uint8_t> got(bytes, 0);
    Request r;
    ranks[1]->dev->pair(0)->post_recv(got.data(), bytes, tag(9), &r);
    std::thread t([&] { drive(*ranks[0]->dev, {&s}); });
    EXPECT_TRUE(drive(*ranks[1]->dev, {&r}).finished);
    t.join();
    EXPECT_EQ(r.state, Request::State::done);
    EXPECT_EQ(s.state, Request::State::done);
    EXPECT_EQ(got, data) << bytes << " bytes";
  }
}

TEST_F(ShmThreads, DifferentSizeIsReportedForSmallAndLargeMessages) {
  auto ranks = connect_all(2);
  // Small: through the ring.
  int64_t x = 1, y = 0;
  Request s, r;
  ranks[0]->dev->pair(1)->post_send(&x, sizeof x, tag(1), &s);
  ranks[1]->dev->pair(0)->post_recv(&y, 4, tag(1), &r);
  drive(*ranks[1]->dev, {&r});
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_EQ(r.failure, Failure::size_mismatch);
  EXPECT_EQ(r.got_bytes, 8u);
  EXPECT_EQ(ranks[1]->sink.first(), Failure::size_mismatch);

  // Large: described for a remote read, on a fresh pair of ranks.
  auto fresh = connect_all(2);
  auto big = pattern(300000, 3);
  std::vector<uint8_t> got(200000, 0);
  Request s2, r2;
  fresh[0]->dev->pair(1)->post_send(big.data(), big.size(), tag(5), &s2);
  fresh[1]->dev->pair(0)->post_recv(got.data(), got.size(), tag(5), &r2);
  drive(*fresh[1]->dev, {&r2});
  ASSERT_EQ(r2.state, Request::State::failed);
  EXPECT_EQ(r2.failure, Failure::size_mismatch);
  EXPECT_EQ(r2.got_bytes, big.size());
  EXPECT_TRUE(r2.got_tag == tag(5));
  EXPECT_EQ(fresh[1]->sink.first(), Failure::size_mismatch);
}

TEST_F(ShmThreads, SleepingReceiverIsWokenBySender) {
  auto ranks = connect_all(2);
  int x = 42, y = 0;
  Request s, r;
  ranks[1]->dev->pair(0)->post_recv(&y, sizeof y, tag(3), &r);
  std::thread sender([&] {
    std::this_thread::sleep_for(150ms);
    ranks[0]->dev->pair(1)->post_send(&x, sizeof x, tag(3), &s);
    drive(*ranks[0]->dev, {&s});
  });
  // Sleeps of up to 5 s: only a doorbell ends them early.
  DriveStats st = drive(*ranks[1]->dev, {&r}, 10s, 5000ms);
  sender.join();
  EXPECT_TRUE(st.finished);
  EXPECT_EQ(y, 42);
  EXPECT_GE(st.sleeps, 1) << "the receiver never slept";
  EXPECT_LT(st.seconds, 2.0) << "the receiver was not woken when the message arrived";
}

TEST_F(ShmThreads, SleepingSenderIsWokenWhenTheRingDrains) {
  ScopedEnv slots("KOLO_SHM_SLOTS", "2");
  ScopedEnv cma("KOLO_SHM_CMA_MIN_BYTES", "0");
  auto ranks = connect_all(2);
  auto data = pattern(200000, 4);  // far more than two slots
  std::vector<uint8_t> got(data.size(), 0);
  Request s, r;
  ranks[0]->dev->pair(1)->post_send(data.data(), data.size(), tag(4), &s);
  std::thread receiver([&] {
    std::this_thread::sleep_for(150ms);
    ranks[1]->dev->pair(0)->post_recv(got.data(), got.size(), tag(4), &r);
    drive(*ranks[1]->dev, {&r});
  });
  DriveStats st = drive(*ranks[0]->dev, {&s}, 10s, 5000ms);
  receiver.join();
  EXPECT_TRUE(st.finished);
  EXPECT_EQ(got, data);
  EXPECT_LT(st.seconds, 2.0) << "the sender was not woken when slots were freed";
}

TEST_F(ShmThreads, SleepingSenderIsWokenWhenItsLargeMessageWasRead) {
  auto ranks = connect_all(2);
  auto data = pattern(1 << 20, 5);
  std::vector<uint8_t> got(data.size(), 0);
  Request s, r;
  auto t0 = Clock::now();
  ranks[0]->dev->pair(1)->post_send(data.data(), data.size(), tag(4), &s);
  std::thread receiver([&] {
    std::this_thread::sleep_for(150ms);
    ranks[1]->dev->pair(0)->post_recv(got.data(), got.size(), tag(4), &r);
    drive(*ranks[1]->dev, {&r});
  });
  DriveStats st = drive(*ranks[0]->dev, {&s}, 10s, 5000ms);
  receiver.join();
  EXPECT_TRUE(st.finished);
  EXPECT_EQ(got, data);
  // The send completes only once the receiver has read the buffer (no copy was made) ...
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.14);
  // ... and the sender hears of it at once.
  EXPECT_LT(st.seconds, 2.0);
}

TEST_F(ShmThreads, IdleDeviceSleepsInsteadOfSpinning) {
  auto ranks = connect_all(2);
  int y = 0;
  Request r;
  ranks[1]->dev->pair(0)->post_recv(&y, sizeof y, tag(1), &r);
  // Nothing will arrive: count how often the loop comes back in 400 ms of 100 ms sleeps.
  int loops = 0;
  auto end = Clock::now() + 400ms;
  while (Clock::now() < end) {
    ++loops;
    if (ranks[1]->dev->poll()) continue;
    if (ranks[1]->dev->prepare_sleep()) continue;
    pollfd pf{ranks[1]->dev->wait_fd(), POLLIN, 0};
    ::poll(&pf, 1, 100);
  }
  EXPECT_LT(loops, 200) << "wait_fd() stays readable: an idle rank would spin";
  EXPECT_EQ(r.state, Request::State::pending);
}

TEST_F(ShmThreads, ArmingForSleepIssuesAMembarrierOnlyWhenWaitingForSomething) {
  ScopedEnv mode("KOLO_SHM_ASYMMETRIC_FENCE", "1");
  auto ranks = connect_all(2);
  auto* pair = static_cast<shm::ShmPair*>(ranks[1]->dev->pair(0));
  if (!pair->light_fence()) GTEST_SKIP() << "membarrier's global expedited command is not available here";
  auto& dev = *ranks[1]->dev;
  // Nothing posted: no flag to raise, so no peer could skip a fence for us.
  (void)dev.poll();
  const unsigned long before = shm::heavy_fences_issued();
  EXPECT_FALSE(dev.prepare_sleep());
  EXPECT_EQ(shm::heavy_fences_issued(), before) << "an idle rank paid a membarrier to sleep";
  // Waiting for a message: the flag goes up, and the membarrier orders it before the last look.
  int y = 0;
  Request r;
  dev.pair(0)->post_recv(&y, sizeof y, tag(6), &r);
  (void)dev.poll();
  EXPECT_FALSE(dev.prepare_sleep());
  EXPECT_EQ(shm::heavy_fences_issued(), before + 1);
  int x = 7;
  Request s;
  ranks[0]->dev->pair(1)->post_send(&x, sizeof x, tag(6), &s);
  EXPECT_TRUE(drive(*ranks[0]->dev, {&s}).finished);
  EXPECT_TRUE(drive(dev, {&r}).finished);
  EXPECT_EQ(y, 7);
}

TEST_F(ShmThreads, SegmentsAreUnlinkedOnceConnected) {
  auto ranks = connect_all(3);
  EXPECT_TRUE(leftover_segments().empty());
}

TEST_F(ShmThreads, ReachesOnlyRanksOnTheSameHost) {
  auto store = make_hash_store();
  auto b = make_bootstrap(*store, 1, 3, nullptr);
  b.host_ids = {"a", "a", "b"};
  EXPECT_TRUE(shm::ShmDevice::reaches(b, 0));
  EXPECT_FALSE(shm::ShmDevice::reaches(b, 2));
  b.host_ids.clear();
  EXPECT_FALSE(shm::ShmDevice::reaches(b, 0));
}

namespace {

// Both ranks try to connect; returns the first error (both fail the same way).
std::string connect_error() {
  auto store = make_hash_store();
  Sink s0, s1;
  std::string errs[2];
  std::thread t([&] {
    try {
      shm::ShmDevice::connect(make_bootstrap(*store, 1, 2, &s1, 7, 3s), {0});
    } catch (const std::exception& e) {
      errs[1] = e.what();
    }
  });
  try {
    shm::ShmDevice::connect(make_bootstrap(*store, 0, 2, &s0, 7, 3s), {1});
  } catch (const std::exception& e) {
    errs[0] = e.what();
  }
  t.join();
  return errs[0].empty() ? errs[1] : errs[0];
}

}  // namespace

TEST_F(ShmThreads, SegmentLargerThanDevShmGivesAClearError) {
  struct statvfs fs {};
  ASSERT_EQ(::statvfs("/dev/shm", &fs), 0);
  unsigned long long avail = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
  unsigned long long slots = avail / (1ull << 30) + 2;  // 1 GiB slots: more than /dev/shm holds
  ASSERT_LE(slots, 1u << 20);
  ScopedEnv slot("KOLO_SHM_SLOT_BYTES", "1G");
  ScopedEnv n("KOLO_SHM_SLOTS", std::to_string(slots));
  auto t0 = Clock::now();
  std::string err = connect_error();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0) << "it must not try to fill /dev/shm first";
  EXPECT_NE(err.find("/dev/shm/kolo-shm-"), std::string::npos) << err;
  EXPECT_NE(err.find(std::to_string(shm::segment_bytes(1, size_t(1) << 30, slots))), std::string::npos) << "names no size: " << err;
  EXPECT_NE(err.find("KOLO_SHM_SLOTS"), std::string::npos) << err;
}

TEST_F(ShmThreads, FullTmpfsGivesAClearError) {
  // A real, tiny /dev/shm: only as root, in a child with its own mount namespace.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tiny tmpfs on /dev/shm";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = fork_rank([&]() -> int {
    ::close(fds[0]);
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=64k") != 0)
      return 3;  // no permission to make a mount namespace here
    std::string err = connect_error();
    ssize_t ignored = ::write(fds[1], err.data(), err.size());
    (void)ignored;
    return 0;
  });
  ::close(fds[1]);
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = wait_child(pid);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot mount a tmpfs in a private mount namespace here";
  ASSERT_EQ(WEXITSTATUS(status), 0);
  // Default geometry: 32 slots of 16 KiB per peer, more than 64 KiB.
  EXPECT_NE(err.find("/dev/shm/kolo-shm-"), std::string::npos) << err;
  EXPECT_NE(err.find(std::to_string(shm::segment_bytes(1, 16384, 32))), std::string::npos) << "names no size: " << err;
  EXPECT_NE(err.find("shm-size"), std::string::npos) << err;
}

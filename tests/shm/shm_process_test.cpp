// The shared-memory transport between real processes (fork), where cross-memory attach reads
// another address space and where death is a SIGKILL: bytes intact at every size both ways,
// large messages read by the receiver, a killed peer noticed quickly while the survivor sleeps,
// abort notices and orderly close, and nothing left in /dev/shm after any of them.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>

#include "kolo/error.hpp"
#include "shm_test_support.hpp"
#include "transports/shm/shm_device.hpp"
#include "transports/shm/shm_fence.hpp"
#include "transports/shm/shm_pair.hpp"

using namespace kolo;
using namespace kolo::shmtest;

namespace {

class ShmProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    job_id();
    store_path_ = fresh_store_path();
  }
  void TearDown() override {
    ::unlink(store_path_.c_str());
    auto left = leftover_segments();
    EXPECT_TRUE(left.empty()) << left.size() << " leftover segment(s), first: " << (left.empty() ? "" : left[0]);
  }

  // Connects this process as `rank` of a 2-rank group through the file store.
  std::unique_ptr<transport::Device> connect_rank(int rank, Sink* sink) {
    store_ = make_file_store(store_path_);
    return shm::ShmDevice::connect(make_bootstrap(*store_, rank, 2, sink), {1 - rank});
  }
  // A key in the shared store, to line the two processes up.
  void mark(const std::string& key) { store_->set("shmtest/" + key, "1"); }
  void await(const std::string& key) { store_->get("shmtest/" + key); }

  std::string store_path_;
  std::shared_ptr<Store> store_;
};

// Expects a child to have exited with status 0.
void expect_clean_exit(int status, const char* who) {
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << who << ": " << (WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status)) : "status " + std::to_string(status));
}


// Sends every size to the other rank while receiving every size from it; returns "" or what
// was wrong.
std::string exchange(transport::Device& dev, int me) {
  const std::vector<size_t> kSizes = boundary_sizes();
  int other = 1 - me;
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<Request> s(kSizes.size()), r(kSizes.size());
  std::vector<Request*> all;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    out.push_back(pattern(kSizes[i], static_cast<uint64_t>(me * 100 + i)));
    in.emplace_back(kSizes[i], 0x5A);
  }
  for (size_t i = 0; i < kSizes.size(); ++i) {
    dev.pair(other)->post_recv(in[i].data(), kSizes[i], tag(i), &r[i]);
    dev.pair(other)->post_send(out[i].data(), kSizes[i], tag(i), &s[i]);
    all.push_back(&r[i]);
    all.push_back(&s[i]);
  }
  if (!drive(dev, all, 20s).finished) return "requests did not complete";
  std::string errors;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    if (r[i].state != Request::State::done || s[i].state != Request::State::done)
      errors += "size " + std::to_string(kSizes[i]) + " failed: " + r[i].detail + s[i].detail + "; ";
    else if (in[i] != pattern(kSizes[i], static_cast<uint64_t>(other * 100 + i)))
      errors += "payload of size " + std::to_string(kSizes[i]) + " differs; ";
  }
  return errors;
}

// Makes process_vm_readv fail with EPERM in this process from now on, as a restrictive
// container profile or ptrace policy would. False if seccomp filters are not available.
bool forbid_syscall(int nr) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}
bool forbid_process_vm_readv() { return forbid_syscall(__NR_process_vm_readv); }

// Rank 1 receives one large message, polling slowly (2 ms between polls: one piece per poll), from
// rank 0, which polls without pause while it waits: rank 0 writes pieces into rank 1's buffer
// itself. `forbid_write` makes process_vm_writev fail in rank 0 after the setup (the permission
// probe reads): it must hand its first piece back, and rank 1 read it. Returns rank 0's
// helped_bytes(), or -1 when seccomp is not available.
int64_t large_message_with_help(const std::function<std::unique_ptr<transport::Device>(int, Sink*)>& connect,
                                const std::function<void(const std::string&)>& mark,
                                const std::function<void(const std::string&)>& await, bool forbid_write) {
  const size_t bytes = (size_t{12} << 20) + 3;
  pid_t child = fork_rank([&] {
    Sink sink;
    auto dev = connect(1, &sink);
    await("posted");
    std::vector<uint8_t> got(bytes, 0x11);
    Request r;
    dev->pair(0)->post_recv(got.data(), got.size(), tag(5), &r);
    const auto until = Clock::now() + 20s;
    while (r.state == Request::State::pending && Clock::now() < until) {
      dev->poll();
      std::this_thread::sleep_for(2ms);
    }
    const bool ok = r.state == Request::State::done && got == pattern(bytes, 5);
    if (!ok) std::fprintf(stderr, "rank 1: %s\n", r.state == Request::State::done ? "payload differs" : r.detail.c_str());
    return ok && dev->close(Clock::now() + 10s).empty() && sink.first() == Failure::none ? 0 : 1;
  });
  Sink sink;
  auto dev = connect(0, &sink);
  if (forbid_write && !forbid_syscall(__NR_process_vm_writev)) {
    ::kill(child, SIGKILL);
    wait_child(child);
    return -1;
  }
  auto data = pattern(bytes, 5);
  Request s;
  dev->pair(1)->post_send(data.data(), data.size(), tag(5), &s);
  mark("posted");
  EXPECT_TRUE(drive(*dev, {&s}).finished);
  EXPECT_EQ(s.state, Request::State::done) << s.detail;
  EXPECT_TRUE(dev->close(Clock::now() + 10s).empty());
  EXPECT_EQ(sink.first(), Failure::none) << sink.detail;
  expect_clean_exit(wait_child(child), "rank 1");
  return static_cast<int64_t>(static_cast<shm::ShmPair*>(dev->pair(1))->helped_bytes());
}

}  // namespace

TEST_F(ShmProcesses, BytesArriveIntactAtEverySizeBothWays) {
  pid_t child = fork_rank([&] {
    Sink sink;
    auto dev = connect_rank(1, &sink);
    std::string err = exchange(*dev, 1);
    if (!dev->close(Clock::now() + 10s).empty()) err += "rank 0 did not say goodbye; ";
    if (sink.first() != Failure::none) err += "failure: " + sink.detail;
    if (!err.empty()) std::fprintf(stderr, "rank 1: %s\n", err.c_str());
    return err.empty() ? 0 : 1;
  });
  Sink sink;
  auto dev = connect_rank(0, &sink);
  EXPECT_EQ(exchange(*dev, 0), "");
  EXPECT_TRUE(dev->close(Clock::now() + 10s).empty());
  EXPECT_EQ(sink.first(), Failure::none) << sink.detail;
  expect_clean_exit(wait_child(child), "rank 1");
}

TEST_F(ShmProcesses, LargeMessagesAreReadByTheReceiverSmallerOnesAreBuffered) {
  // Just below the threshold a send completes at once (copied into the ring); from the threshold
  // up it completes only when the receiver, 300 ms later, has read it from the sender's memory.
  // The threshold is set to one that a message just below it fits into the ring with (the
  // default, 2 MiB, is above the ring's 512 KiB).
  ScopedEnv threshold("KOLO_SHM_CMA_MIN_BYTES", "32768");
  const size_t at = 32768, below = at - 1;
  pid_t child = fork_rank([&] {
    Sink sink;
    auto dev = connect_rank(1, &sink);
    await("sent");
    std::this_thread::sleep_for(300ms);
    std::vector<uint8_t> a(below), b(at);
    Request ra, rb;
    dev->pair(0)->post_recv(a.data(), a.size(), tag(1), &ra);
    dev->pair(0)->post_recv(b.data(), b.size(), tag(2), &rb);
    bool ok = drive(*dev, {&ra, &rb}).finished && a == pattern(below, 1) && b == pattern(at, 2);
    dev->close(Clock::now() + 10s);
    return ok ? 0 : 1;
  });
  Sink sink;
  auto dev = connect_rank(0, &sink);
  auto a = pattern(below, 1), b = pattern(at, 2);
  Request sa, sb;
  auto t0 = Clock::now();
  dev->pair(1)->post_send(a.data(), a.size(), tag(1), &sa);
  EXPECT_EQ(sa.state, Request::State::done) << "a message below the threshold waits for the receiver";
  dev->pair(1)->post_send(b.data(), b.size(), tag(2), &sb);
  mark("sent");
  EXPECT_TRUE(drive(*dev, {&sb}).finished);
  EXPECT_EQ(sb.state, Request::State::done) << sb.detail;
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.25)
      << "a message at the threshold completed before the receiver read it";
  EXPECT_TRUE(dev->close(Clock::now() + 10s).empty());
  expect_clean_exit(wait_child(child), "rank 1");
}

TEST_F(ShmProcesses, KilledPeerIsNoticedWhileWaiting) {
  pid_t child = fork_rank([&] {
    Sink sink;
    auto dev = connect_rank(1, &sink);
    mark("up");
    for (;;) ::pause();  // never sends: it is killed
    return 0;
  });
  Sink sink;
  auto dev = connect_rank(0, &sink);
  await("up");
  int y = 0;
  Request r;
  dev->pair(1)->post_recv(&y, sizeof y, tag(1), &r);
  std::thread killer([&] {
    std::this_thread::sleep_for(200ms);
    ::kill(child, SIGKILL);
  });
  // Sleeps of up to 10 s: only the hang-up can end the wait early.
  DriveStats st = drive(*dev, {&r}, 15s, 10000ms);
  killer.join();
  wait_child(child);
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_LT(st.seconds, 2.0) << "the death was noticed late";
  EXPECT_GE(st.sleeps, 1) << "the survivor never slept while waiting";
  EXPECT_EQ(r.failure, Failure::peer_closed);
  EXPECT_EQ(sink.first(), Failure::peer_closed);
  EXPECT_EQ(sink.peer, 1);
  EXPECT_NE(sink.detail.find("rank 1"), std::string::npos) << sink.detail;
}

TEST_F(ShmProcesses, PeerKilledAfterDescribingALargeMessage) {
  pid_t child = fork_rank([&] {
    Sink sink;
    auto dev = connect_rank(1, &sink);
    std::vector<uint8_t> big = pattern(4 << 20, 3);
    Request s;
    dev->pair(0)->post_send(big.data(), big.size(), tag(1), &s);
    mark("described");
    for (;;) ::pause();
    return 0;
  });
  Sink sink;
  auto dev = connect_rank(0, &sink);
  await("described");
  ::kill(child, SIGKILL);
  wait_child(child);
  std::vector<uint8_t> got(4 << 20);
  Request r;
  dev->pair(1)->post_recv(got.data(), got.size(), tag(1), &r);
  DriveStats st = drive(*dev, {&r}, 15s, 10000ms);
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_LT(st.seconds, 2.0);
  EXPECT_EQ(sink.first(), Failure::peer_closed) << sink.detail;
  EXPECT_EQ(sink.peer, 1);
}

TEST_F(ShmProcesses, AbortNoticeReachesTheOtherProcess) {
  const std::string reason = "1\nT\nkolo: allreduce #3 timed out (test)";
  pid_t child = fork_rank([&] {
    Sink sink;
    auto dev = connect_rank(1, &sink);
    await("waiting");
    dev->abort(reason);
    return 0;  // exits right after, as a failing rank would
  });
  Sink sink;
  auto dev = connect_rank(0, &sink);
  int y = 0;
  Request r;
  dev->pair(1)->post_recv(&y, sizeof y, tag(1), &r);
  mark("waiting");
  DriveStats st = drive(*dev, {&r}, 15s, 10000ms);
  expect_clean_exit(wait_child(child), "rank 1");
  ASSERT_EQ(r.state, Request::State::failed);
  EXPECT_LT(st.seconds, 2.0);
  EXPECT_EQ(sink.first(), Failure::peer_aborted);
  EXPECT_EQ(sink.detail, reason);
  EXPECT_EQ(sink.reports, 1) << "the exit after the notice is not a second failure";
}

TEST_F(ShmProcesses, OrderlyCloseThenExitIsNoFailure) {
  pid_t child = fork_rank([&] {
    Sink sink;
    auto dev = connect_rank(1, &sink);
    uint64_t v = 77;
    Request s;
    dev->pair(0)->post_send(&v, sizeof v, tag(1), &s);
    bool ok = dev->close(Clock::now() + 10s).empty() && s.state == Request::State::done && sink.first() == Failure::none;
    return ok ? 0 : 1;  // exits at once: the survivor must take this for a goodbye
  });
  Sink sink;
  auto dev = connect_rank(0, &sink);
  uint64_t v = 0;
  Request r;
  dev->pair(1)->post_recv(&v, sizeof v, tag(1), &r);
  EXPECT_TRUE(drive(*dev, {&r}).finished);
  EXPECT_EQ(v, 77u);
  EXPECT_TRUE(dev->close(Clock::now() + 10s).empty());
  expect_clean_exit(wait_child(child), "rank 1");
  for (int i = 0; i < 100; ++i) dev->poll();
  EXPECT_EQ(sink.first(), Failure::none) << sink.detail;
}

TEST_F(ShmProcesses, WithoutCrossMemoryAttachLargeMessagesGoThroughTheRing) {
  // Rank 1 may not read other processes: rank 0 must copy its large messages through the ring
  // (so a 100 KB send completes before rank 1 even posts its receive), while rank 1's large
  // messages are still read by rank 0. Every size must arrive intact both ways.
  pid_t child = fork_rank([&] {
    if (!forbid_process_vm_readv()) return 3;
    Sink sink;
    auto dev = connect_rank(1, &sink);
    await("sent");
    std::vector<uint8_t> got(100000);
    Request r;
    dev->pair(0)->post_recv(got.data(), got.size(), tag(99), &r);
    bool ok = drive(*dev, {&r}).finished && got == pattern(got.size(), 99);
    std::string err = exchange(*dev, 1);
    if (!err.empty()) std::fprintf(stderr, "rank 1: %s\n", err.c_str());
    ok &= err.empty() && dev->close(Clock::now() + 10s).empty() && sink.first() == Failure::none;
    return ok ? 0 : 1;
  });
  Sink sink;
  std::unique_ptr<transport::Device> dev;
  try {
    dev = connect_rank(0, &sink);
  } catch (const std::exception& e) {
    int status = wait_child(child);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) GTEST_SKIP() << "seccomp filters are not available here";
    FAIL() << e.what();
  }
  auto data = pattern(100000, 99);
  Request s;
  dev->pair(1)->post_send(data.data(), data.size(), tag(99), &s);
  EXPECT_EQ(s.state, Request::State::done) << "the send waited for a receiver that cannot read it";
  mark("sent");
  EXPECT_TRUE(drive(*dev, {&s}).finished);
  EXPECT_EQ(exchange(*dev, 0), "");
  EXPECT_TRUE(dev->close(Clock::now() + 10s).empty());
  EXPECT_EQ(sink.first(), Failure::none) << sink.detail;
  expect_clean_exit(wait_child(child), "rank 1");
}

TEST_F(ShmProcesses, PeerKilledDuringSetupLeavesNothingBehind) {
  // Rank 1 creates and publishes its segment, then is killed while it waits for rank 2 (which
  // never comes), before anyone attached: its own unlink never happens. Rank 0's setup fails
  // too, and must remove what rank 1 left.
  const std::string key = "shmtest/shm/1";  // where rank 1 publishes its names (prefix "shmtest")
  pid_t child = fork_rank([&] {
    auto store = make_file_store(store_path_);
    Sink sink;
    shm::ShmDevice::connect(make_bootstrap(*store, 1, 3, &sink, 7, 30s), {0, 2});
    return 0;
  });
  auto store = make_file_store(store_path_);
  store->get(key);  // rank 1 has created its segment
  ::kill(child, SIGKILL);
  wait_child(child);
  EXPECT_FALSE(leftover_segments().empty()) << "rank 1's segment should exist until someone removes it";
  store->set_timeout(1500ms);
  Sink sink;
  std::string err;
  try {
    shm::ShmDevice::connect(make_bootstrap(*store, 0, 3, &sink, 7, 3s), {1, 2});
  } catch (const std::exception& e) {
    err = e.what();
  }
  EXPECT_FALSE(err.empty()) << "setup without rank 2 cannot succeed";
  // TearDown checks that nothing is left.
}

TEST_F(ShmProcesses, WaitingSenderWritesPiecesOfItsLargeMessageIntoTheReceiver) {
  const int64_t helped = large_message_with_help([&](int r, Sink* k) { return connect_rank(r, k); },
                                                 [&](const std::string& k) { mark(k); },
                                                 [&](const std::string& k) { await(k); }, false);
  EXPECT_GT(helped, 0) << "the sender, polling while the receiver paused between pieces, wrote none";
}

TEST_F(ShmProcesses, SenderThatMayNotWriteHandsItsPieceBack) {
  const int64_t helped = large_message_with_help([&](int r, Sink* k) { return connect_rank(r, k); },
                                                 [&](const std::string& k) { mark(k); },
                                                 [&](const std::string& k) { await(k); }, true);
  if (helped < 0) GTEST_SKIP() << "seccomp filters are not available here";
  EXPECT_EQ(helped, 0);
}

namespace {

// The sleep/wake handshake under races (transports/shm/shm_fence.hpp): rank 1 receives and rank
// 0 sends `kMessages` small messages one at a time, each side going to sleep (arm, a last look,
// poll(2) for up to 2 s) whenever a poll finds nothing, and pausing 0-40 µs at random between
// operations so that a publish often lands while the other side arms. A ring of two slots makes
// the sender wait for room too (the freeing side of the handshake). A lost wake-up costs a whole
// 2 s sleep: no operation may take 1 s (a sender that skips its look at the flag fails within
// a few dozen messages). The store-buffer window that the fence or the membarrier closes is a
// few hundred nanoseconds, and the sleeper's arm makes a system call between its flag and its
// last look: this does not hit that window on purpose, it checks that both modes wake reliably.
// `child_light`: whether rank 1's pair must skip the fence (it fails otherwise). Returns "" or
// what went wrong, and whether rank 0's pair skipped it.
struct RaceResult {
  std::string error;
  bool parent_light = false;
};

RaceResult race_sleep_and_publish(const std::function<std::unique_ptr<transport::Device>(int, Sink*)>& connect,
                                  const char* parent_mode, const char* child_mode, bool child_light) {
  constexpr int kMessages = 3000;
  ScopedEnv slots("KOLO_SHM_SLOTS", "2");
  auto pause = [](std::mt19937& rng) {
    const auto until = Clock::now() + std::chrono::microseconds(rng() % 41);
    while (Clock::now() < until) {
    }
  };
  pid_t child = fork_rank([&] {
    ScopedEnv mode("KOLO_SHM_ASYMMETRIC_FENCE", child_mode);
    Sink sink;
    auto dev = connect(1, &sink);
    if (static_cast<shm::ShmPair*>(dev->pair(0))->light_fence() != child_light) {
      std::fprintf(stderr, "rank 1: the pair %s the fence\n", child_light ? "keeps" : "skips");
      return 4;
    }
    std::mt19937 rng(2);
    for (int i = 0; i < kMessages; ++i) {
      uint64_t got = 0;
      Request r;
      dev->pair(0)->post_recv(&got, sizeof got, tag(9), &r);
      const DriveStats st = drive(*dev, {&r}, 10s, 2000ms);
      if (!st.finished || r.state != Request::State::done || got != static_cast<uint64_t>(i) * 7919) {
        std::fprintf(stderr, "rank 1: message %d: %s\n", i, st.finished ? "wrong payload or failed" : "not received in 10 s");
        return 1;
      }
      if (st.seconds >= 1.0) {
        std::fprintf(stderr, "rank 1: receive %d took %.3f s: a wake-up was lost\n", i, st.seconds);
        return 2;
      }
      if (rng() % 4 == 0) pause(rng);
    }
    return dev->close(Clock::now() + 10s).empty() && sink.first() == Failure::none ? 0 : 3;
  });
  RaceResult res;
  ScopedEnv mode("KOLO_SHM_ASYMMETRIC_FENCE", parent_mode);
  Sink sink;
  auto dev = connect(0, &sink);
  res.parent_light = static_cast<shm::ShmPair*>(dev->pair(1))->light_fence();
  std::mt19937 rng(1);
  for (int i = 0; i < kMessages && res.error.empty(); ++i) {
    uint64_t v = static_cast<uint64_t>(i) * 7919;
    // As the direct path sends (straight into the ring, publish then look at the flag), and
    // when the ring is full as the engine does (posted, then driven with sleeps).
    if (dev->pair(1)->send_now(&v, sizeof v, tag(9)) != transport::Pair::Now::sent) {
      Request s;
      dev->pair(1)->post_send(&v, sizeof v, tag(9), &s);
      const DriveStats st = drive(*dev, {&s}, 10s, 2000ms);
      if (!st.finished || s.state != Request::State::done) res.error = "send " + std::to_string(i) + " did not complete";
      else if (st.seconds >= 1.0) res.error = "send " + std::to_string(i) + " took " + std::to_string(st.seconds) + " s: a wake-up was lost";
    }
    if (rng() % 2 == 0) pause(rng);
  }
  if (!dev->close(Clock::now() + 10s).empty()) res.error += "; close did not complete";
  const int status = wait_child(child, 60s);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    res.error += "; rank 1 failed (status " + std::to_string(status) + ")";
  return res;
}

}  // namespace

TEST_F(ShmProcesses, NoWakeUpIsLostWhenPublishesRaceSleepsWithoutFences) {
  if (!shm::asymmetric_fences()) GTEST_SKIP() << "membarrier's global expedited command is not available here";
  const RaceResult r = race_sleep_and_publish([&](int k, Sink* s) { return connect_rank(k, s); }, "1", "1", true);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.parent_light) << "both ranks use membarrier: the pair should skip the fence";
}

TEST_F(ShmProcesses, NoWakeUpIsLostWhenPublishesRaceSleepsWithFences) {
  const RaceResult r = race_sleep_and_publish([&](int k, Sink* s) { return connect_rank(k, s); }, "0", "0", false);
  EXPECT_EQ(r.error, "");
  EXPECT_FALSE(r.parent_light);
}

TEST_F(ShmProcesses, ARankWithoutMembarrierMakesItsPeerFenceToo) {
  // The parent could skip its fences, the child does not issue membarrier before it sleeps: the
  // parent must see that in the child's segment and fence after every publish.
  const RaceResult r = race_sleep_and_publish([&](int k, Sink* s) { return connect_rank(k, s); }, "1", "0", false);
  EXPECT_EQ(r.error, "");
  EXPECT_FALSE(r.parent_light) << "the child sleeps without membarrier: skipping the fence could lose its wake-ups";
}

// Sends and receives in flight on the engine (Executor's pending entries, one lane per peer and
// direction): thousands issued before the first wait, waited for in any order; a lane whose
// message is late does not hold another lane's completions; a deadline among many in flight.
// Ranks are forked processes over shared memory and TCP; every value is checked.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.hpp"

using kolo::Buffer;
using kolo::WorkPtr;

namespace {

using RankBody = std::function<std::string(kolo::ProcessGroup&, int rank)>;

std::shared_ptr<kolo::ProcessGroup> make_group(const std::string& store, int rank, int size, const std::string& transport,
                                               std::chrono::milliseconds timeout) {
  kolo::GroupOptions o;
  o.transport = transport;
  o.secret = "pending-p2p-test";
  o.timeout = timeout;
  return kolo::ProcessGroup::create(kolo::make_file_store(store), rank, size, o);
}

// Runs `body` on `size` ranks (rank 0 here, the others forked); "" from every rank passes.
// `failing`: the body ends the group in an error, so shutdown() may report it again.
void run_ranks(int size, const std::string& transport, const RankBody& body,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(60000), bool failing = false) {
  const std::string store = (std::filesystem::temp_directory_path() /
                             ("kolo-pending-p2p-" + std::to_string(getpid()) + "-" + transport))
                                .string();
  std::filesystem::remove_all(store);
  auto one = [&](int rank) {
    std::string f;
    try {
      auto g = make_group(store, rank, size, transport, timeout);
      f = body(*g, rank);
      try {
        g->shutdown();
      } catch (const kolo::Error&) {
        if (!failing) throw;
      }
    } catch (const std::exception& e) {
      f = std::string("exception: ") + e.what();
    }
    return f.empty() ? f : "rank " + std::to_string(rank) + ": " + f;
  };
  std::vector<pid_t> kids;
  for (int r = 1; r < size; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string f = one(r);
      if (!f.empty()) fprintf(stderr, "%s\n", f.c_str());
      _exit(f.empty() ? 0 : 1);
    }
    kids.push_back(pid);
  }
  EXPECT_EQ(one(0), "");
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a forked rank failed (its stderr says)";
  }
  std::filesystem::remove_all(store);
}

float value(int from, int i) { return static_cast<float>(100000 * from + i); }

class PendingP2p : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "forks ranks: not under ThreadSanitizer";
#endif
  }
};

}  // namespace

// Each rank issues 3,000 sends and 3,000 receives, interleaved, before it waits for any, then
// waits for them newest first (each wait finds its entry among thousands).
TEST_P(PendingP2p, ThousandsIssuedBeforeTheFirstWait) {
  run_ranks(2, GetParam(), [](kolo::ProcessGroup& g, int rank) -> std::string {
    constexpr int kN = 3000;
    const int peer = 1 - rank;
    std::vector<float> out(kN), in(kN, -1.0f);
    std::vector<WorkPtr> works;
    works.reserve(2 * kN);
    for (int i = 0; i < kN; ++i) {
      out[static_cast<size_t>(i)] = value(rank, i);
      works.push_back(g.send(Buffer(&out[static_cast<size_t>(i)], 1), peer));
      works.push_back(g.recv(Buffer(&in[static_cast<size_t>(i)], 1), peer));
    }
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
    for (int i = 0; i < kN; ++i)
      if (in[static_cast<size_t>(i)] != value(peer, i))
        return "receive " + std::to_string(i) + " got " + std::to_string(in[static_cast<size_t>(i)]);
    for (const WorkPtr& w : works)
      if (!w->is_success()) return "a Work did not succeed";
    return "";
  });
}

// Rank 0 posts a receive from rank 1, whose message comes only after rank 0 has answered it,
// then receives from rank 2: those must complete while the first is still in flight.
TEST_P(PendingP2p, ALateLaneDoesNotHoldAnother) {
  run_ranks(3, GetParam(), [](kolo::ProcessGroup& g, int rank) -> std::string {
    constexpr int kN = 200;
    if (rank == 0) {
      float late = -1;
      WorkPtr held = g.recv(Buffer(&late, 1), 1);
      std::vector<float> in(kN, -1.0f);
      std::vector<WorkPtr> works;
      for (int i = 0; i < kN; ++i) works.push_back(g.recv(Buffer(&in[static_cast<size_t>(i)], 1), 2));
      for (WorkPtr& w : works) w->wait();
      for (int i = 0; i < kN; ++i)
        if (in[static_cast<size_t>(i)] != value(2, i)) return "receive " + std::to_string(i) + " from rank 2 wrong";
      if (held->is_completed()) return "the receive from rank 1 completed before rank 1 sent";
      float go = 1;
      g.send(Buffer(&go, 1), 1)->wait();
      held->wait();
      if (late != value(1, 7)) return "the late message is wrong: " + std::to_string(late);
      return "";
    }
    if (rank == 1) {
      float go = 0;
      g.recv(Buffer(&go, 1), 0)->wait();
      float v = value(1, 7);
      g.send(Buffer(&v, 1), 0)->wait();
      return go == 1 ? "" : "go was " + std::to_string(go);
    }
    std::vector<float> out(kN);
    std::vector<WorkPtr> works;
    for (int i = 0; i < kN; ++i) {
      out[static_cast<size_t>(i)] = value(2, i);
      works.push_back(g.send(Buffer(&out[static_cast<size_t>(i)], 1), 0));
    }
    for (WorkPtr& w : works) w->wait();
    return "";
  });
}

// 500 receives in flight, of which the peer sends 499: the last one ends in a timeout while the
// others succeed.
TEST_P(PendingP2p, ADeadlineAmongManyInFlight) {
  run_ranks(
      2, GetParam(),
      [](kolo::ProcessGroup& g, int rank) -> std::string {
        constexpr int kN = 500;
        if (rank == 1) {
          std::vector<float> out(kN - 1);
          std::vector<WorkPtr> works;
          for (int i = 0; i < kN - 1; ++i) {
            out[static_cast<size_t>(i)] = value(1, i);
            works.push_back(g.send(Buffer(&out[static_cast<size_t>(i)], 1), 0));
          }
          try {
            for (WorkPtr& w : works) w->wait();
          } catch (const kolo::Error&) {
            // Rank 0's timeout aborts the group: sends still in flight may end in its error.
          }
          // Stay until rank 0 has timed out, so that its receive times out rather than finds us gone.
          std::this_thread::sleep_for(std::chrono::milliseconds(3000));
          return "";
        }
        std::vector<float> in(kN, -1.0f);
        std::vector<WorkPtr> works;
        for (int i = 0; i < kN; ++i) works.push_back(g.recv(Buffer(&in[static_cast<size_t>(i)], 1), 1));
        for (int i = 0; i < kN - 1; ++i) {
          works[static_cast<size_t>(i)]->wait();
          if (in[static_cast<size_t>(i)] != value(1, i)) return "receive " + std::to_string(i) + " wrong";
        }
        const auto t0 = std::chrono::steady_clock::now();
        try {
          works.back()->wait();
          return "the receive nobody sent completed";
        } catch (const kolo::TimeoutError& e) {
          const std::string what = e.what();
          if (what.find("recv") == std::string::npos) return "the timeout does not name the receive: " + what;
        } catch (const kolo::Error& e) {
          return std::string("not a timeout: ") + e.what();
        }
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30)) return "the timeout took over 30 s";
        return "";
      },
      std::chrono::milliseconds(1500), /*failing=*/true);
}

INSTANTIATE_TEST_SUITE_P(Transports, PendingP2p, ::testing::Values("shm", "tcp"));

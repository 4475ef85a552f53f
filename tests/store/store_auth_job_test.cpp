// End to end: a kolorun job (kolorun makes the job's secret) forms a group whose store, hosted
// by kolorun (KOLO_STORE_ADDR), is authenticated; while it runs, this test attacks the store's port as a torch
// client would (a c10d SET of a key) and with random bytes. Both are refused and logged with
// their address, the job's all-reduce is correct, and the key was never written.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kolorun_process.hpp"
#include "store_test_util.hpp"

namespace {

using kolo::launcher::testing::ChildProcess;

// Connects to 127.0.0.1:port, retrying while rank 0 has not started its store yet.
int connect_when_up(uint16_t port, double seconds) {
  const double until = kolo::launcher::testing::monotonic_seconds() + seconds;
  while (kolo::launcher::testing::monotonic_seconds() < until) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      timeval tv{10, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      return fd;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

// Sends `bytes`, then true when the server hangs up without a byte of reply.
bool refused(uint16_t port, const std::vector<uint8_t>& bytes) {
  int fd = connect_when_up(port, 20);
  if (fd < 0) return false;
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  char c;
  ssize_t n = ::recv(fd, &c, 1, 0);
  const bool hung_up = n == 0 || (n < 0 && errno == ECONNRESET);
  ::close(fd);
  return hung_up;
}

TEST(StoreAuthJob, KolorunJobRefusesHostileStoreClientsAndRunsCorrectly) {
  const std::string go = "/tmp/kolo-store-auth-go-" + std::to_string(::getpid());
  const std::string port_file = "/tmp/kolo-store-auth-port-" + std::to_string(::getpid());
  ::unlink(go.c_str());
  ::unlink(port_file.c_str());
  ChildProcess job({kolo::launcher::testing::kolorun_path(), "-n", "2", "-x", "KOLO_TEST_GO_FILE=" + go, "-x",
                    "KOLO_TEST_STORE_FILE=" + port_file, kolo::launcher::testing::probe_path("KOLO_STORE_AUTH_WORKER")},
                   {{"KOLO_LAUNCH_GRACE", "2"}});
  // The store's port, as rank 0 read it from KOLO_STORE_ADDR (kolorun picks a free one).
  uint16_t port = 0;
  const double until = kolo::launcher::testing::monotonic_seconds() + 30;
  while (port == 0 && kolo::launcher::testing::monotonic_seconds() < until) {
    std::ifstream in(port_file);
    int p = 0;
    if (in >> p) port = static_cast<uint16_t>(p);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::unlink(port_file.c_str());
  ASSERT_NE(port, 0) << "rank 0 never wrote the store's port";

  // torch >= 2.1's opening and a SET of "victim", as one write.
  std::vector<uint8_t> c10d_set = {0, 0xCE, 0xF7, 0x85, 0x3C, 1};
  for (const std::string s : {"/victim", "planted"}) {
    for (int i = 0; i < 8; ++i) c10d_set.push_back(uint8_t(uint64_t(s.size()) >> (8 * i)));
    c10d_set.insert(c10d_set.end(), s.begin(), s.end());
  }
  EXPECT_TRUE(refused(port, c10d_set));
  std::mt19937 rng(15);
  std::vector<uint8_t> noise(4096);
  for (auto& b : noise) b = uint8_t(rng());
  noise[0] = 0x42;  // not the authentication code, whatever the seed
  EXPECT_TRUE(refused(port, noise));
  std::ofstream(go) << "go\n";

  const auto result = job.wait(90);
  ::unlink(go.c_str());
  ASSERT_FALSE(result.timed_out) << result.err;
  EXPECT_EQ(result.exit_code(), 0) << "stdout:\n" << result.out << "\nstderr:\n" << result.err;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(result.out.find("rank " + std::to_string(rank) + ": allreduce 3, attacker's key absent"), std::string::npos)
        << result.out;
  }
  EXPECT_NE(result.err.find("refused unauthenticated client 127.0.0.1:"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("sent a c10d request"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("sent garbage"), std::string::npos) << result.err;
}

}  // namespace

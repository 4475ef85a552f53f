// The kolo-store program (path in $KOLO_STORE_EXE): serves clients on the port it prints,
// stops cleanly on SIGTERM, and refuses bad arguments.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstdlib>

#include "kolo/store.hpp"
#include "store_test_util.hpp"

namespace kolo {
namespace {

using namespace store_test;

struct Spawned {
  pid_t pid = -1;
  int stdout_fd = -1;
};

Spawned spawn_store(const std::vector<std::string>& args) {
  const char* exe = std::getenv("KOLO_STORE_EXE");
  if (exe == nullptr) throw std::runtime_error("KOLO_STORE_EXE is not set (run through meson test)");
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    std::vector<char*> argv{const_cast<char*>(exe)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(exe, argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  return {pid, out[0]};
}

// Reads stdout until a newline (bounded).
std::string read_line(int fd, Ms limit = Ms(5000)) {
  std::string line;
  Stopwatch clock;
  while (line.empty() || line.back() != '\n') {
    pollfd pfd{fd, POLLIN, 0};
    int left = static_cast<int>((limit - clock.elapsed()).count());
    if (left <= 0 || ::poll(&pfd, 1, left) != 1) break;
    char c;
    if (::read(fd, &c, 1) != 1) break;
    line += c;
  }
  return line;
}

TEST(KoloStoreCli, ServesClientsAndStopsOnSigterm) {
  Spawned proc = spawn_store({"--host", "127.0.0.1", "--port", "0"});
  std::string banner = read_line(proc.stdout_fd);
  const std::string prefix = "kolo-store: listening on 127.0.0.1:";
  ASSERT_EQ(banner.rfind(prefix, 0), 0u) << banner;
  const int port = std::stoi(banner.substr(prefix.size()));
  ASSERT_GT(port, 0);

  TCPStore::Options opts;
  opts.port = static_cast<uint16_t>(port);
  opts.timeout = Ms(5000);
  auto a = TCPStore::create(opts);
  auto b = TCPStore::create(opts);
  a->set("k", std::string("v"));
  EXPECT_EQ(b->get_string("k"), "v");
  EXPECT_EQ(b->add("n", 4), 4);

  ::kill(proc.pid, SIGTERM);
  EXPECT_EQ(wait_child(proc.pid, Ms(5000)), 0);
  EXPECT_EQ(read_line(proc.stdout_fd), "kolo-store: stopping on signal " + std::to_string(SIGTERM) + "\n");
  ::close(proc.stdout_fd);
}

TEST(KoloStoreCli, RefusesBadArguments) {
  Spawned bad_port = spawn_store({"--port", "99999"});
  EXPECT_EQ(wait_child(bad_port.pid, Ms(5000)), 2);
  ::close(bad_port.stdout_fd);
  Spawned unknown = spawn_store({"--frobnicate"});
  EXPECT_EQ(wait_child(unknown.pid, Ms(5000)), 2);
  ::close(unknown.stdout_fd);
}

}  // namespace
}  // namespace kolo

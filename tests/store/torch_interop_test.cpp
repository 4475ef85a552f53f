// Interop with PyTorch's own TCPStore (Debian's torch 1.13, run by /usr/bin/python3 through
// torch_store_peer.py): a torch client uses a store kolo hosts, and a kolo client joins a store
// torch hosts. Both sides check every value the other wrote. Skipped, saying so, where no Python
// with torch exists.
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "kolo/store.hpp"
#include "store_test_util.hpp"

extern char** environ;

namespace kolo {
namespace {

using namespace store_test;

const char* python() {
  const char* p = std::getenv("KOLO_TEST_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

bool torch_available() {
  std::string cmd = std::string(python()) + " -c 'import torch.distributed' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::string peer_script() { return std::string(KOLO_TEST_SOURCE_DIR) + "/torch_store_peer.py"; }

// The Python peer, its stdout on a pipe.
struct Peer {
  pid_t pid = -1;
  int out = -1;
  std::string text;  // everything read so far

  explicit Peer(const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    std::vector<std::string> all = {python(), peer_script()};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) throw std::runtime_error("spawn");
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    out = fds[0];
  }
  ~Peer() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out >= 0) ::close(out);
  }

  // Reads until `needle` shows up or the output ends / the time is up.
  bool read_until(const std::string& needle, Ms limit = Ms(60000)) {
    Stopwatch clock;
    while (text.find(needle) == std::string::npos) {
      pollfd pfd{out, POLLIN, 0};
      int left = static_cast<int>((limit - clock.elapsed()).count());
      if (left <= 0 || ::poll(&pfd, 1, left) != 1) return false;
      char buf[4096];
      ssize_t n = ::read(out, buf, sizeof(buf));
      if (n <= 0) return false;
      text.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  int exit_code(Ms limit = Ms(60000)) {
    read_until("\x01never\x01", limit);  // drain to EOF
    int code = wait_child(pid, Ms(5000));
    pid = -1;
    return code;
  }
};

Bytes text_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

// What both tests' kolo side writes first and checks last (the peer's half is in the script).
void kolo_writes(Store& store) {
  store.set("counter", std::string("7"));
  store.set("cas", std::string("kolo"));
  store.set("to_delete", std::string("x"));
  store.set("from_kolo", Bytes{'k', 'o', 'l', 'o', ' ', 'v', 'a', 'l', 'u', 'e', ' ', 0x00, 0xff});
}

void kolo_checks(Store& store) {
  store.wait({"from_torch"}, Ms(30000));
  EXPECT_EQ(store.get_string("from_torch"), "torch value");
  Bytes all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(store.get("binary"), all);
  EXPECT_EQ(store.add("counter", 0), 17);
  EXPECT_EQ(store.get_string("cas"), "torch");
  EXPECT_FALSE(store.check({"to_delete"}));
}

TEST(TorchInterop, TorchClientUsesAStoreKoloHosts) {
  if (!torch_available()) GTEST_SKIP() << python() << " cannot import torch.distributed: interop not tested";
  TCPStore::Options opts;
  opts.port = 0;
  opts.is_server = true;
  opts.timeout = Ms(30000);
  auto store = TCPStore::create(opts);
  kolo_writes(*store);
  Peer peer({"client", std::to_string(store->port())});
  kolo_checks(*store);
  EXPECT_EQ(peer.exit_code(), 0) << peer.text;
  EXPECT_NE(peer.text.find("all checks passed"), std::string::npos) << peer.text;
  // The torch client counted itself in c10d's "init/" (world size 2); our keys and its keys are
  // one key space: init/, counter, cas, from_kolo, binary, from_torch.
  EXPECT_EQ(store->num_keys(), 6);
}

TEST(TorchInterop, KoloClientJoinsAStoreTorchHosts) {
  if (!torch_available()) GTEST_SKIP() << python() << " cannot import torch.distributed: interop not tested";
  Peer peer({"server"});
  ASSERT_TRUE(peer.read_until("\n")) << peer.text;
  auto at = peer.text.find("port ");
  ASSERT_NE(at, std::string::npos) << peer.text;
  TCPStore::Options opts;
  opts.port = static_cast<uint16_t>(std::stoi(peer.text.substr(at + 5)));
  opts.world_size = 2;  // counted in torch's "init/", as a torch client would be
  opts.timeout = Ms(30000);
  auto store = TCPStore::create(opts);
  // Debian's torch 1.13 speaks the legacy dialect; the client found that out by itself.
  EXPECT_EQ(store->protocol_name(), "torch<=2.0");
  kolo_writes(*store);
  kolo_checks(*store);
  EXPECT_EQ(store->add("init/", 0), 0) << "user keys and c10d's init/ must not mix";
  store->set("kolo_done", std::string("1"));
  EXPECT_EQ(peer.exit_code(), 0) << peer.text;
  EXPECT_NE(peer.text.find("all checks passed"), std::string::npos) << peer.text;
}

// With authentication on (a job secret), torch's client cannot take part: it is refused before
// its SET is read, and the key kolo wrote is unchanged. What the c10d protocol does not protect
// when it must be spoken is in docs/RELIABILITY.md.
TEST(TorchInterop, TorchClientIsRefusedByAStoreWithAuthentication) {
  if (!torch_available()) GTEST_SKIP() << python() << " cannot import torch.distributed: interop not tested";
  auto server = TCPStoreServer::start("127.0.0.1", 0, "job secret");
  TCPStore::Options opts;
  opts.port = server->port();
  opts.timeout = Ms(30000);
  opts.secret = "job secret";
  auto store = TCPStore::create(opts);
  store->set("victim", std::string("kolo"));
  Peer peer({"refused", std::to_string(server->port())});
  EXPECT_EQ(peer.exit_code(), 0) << peer.text;
  EXPECT_NE(peer.text.find("refused as expected"), std::string::npos) << peer.text;
  EXPECT_EQ(store->get_string("victim"), "kolo");
}

}  // namespace
}  // namespace kolo

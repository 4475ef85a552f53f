// The kolo-store program (path in $KOLO_STORE_EXE): serves clients on the port it prints,
// stops cleanly on SIGTERM, and refuses bad arguments.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstdlib>

#include <map>

#include "kolo/error.hpp"
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

// kolo-store inherits this process's environment: a developer's own KOLO_SECRET or
// KOLO_STORE_AUTH would turn authentication on where a test expects it off.
struct NoInheritedAuth : ::testing::Environment {
  void SetUp() override {
    ::unsetenv("KOLO_SECRET");
    ::unsetenv("KOLO_STORE_AUTH");
  }
};
const auto* const no_inherited_auth = ::testing::AddGlobalTestEnvironment(new NoInheritedAuth);

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

// With KOLO_SECRET in its environment (KOLO_STORE_AUTH unset: auto), kolo-store serves only
// clients that prove it; KOLO_STORE_AUTH=off opens it again; on without a secret is refused.
TEST(KoloStoreCli, AuthenticatesClientsWhenGivenTheJobSecret) {
  auto serve = [](const std::map<std::string, std::string>& env, bool* plain_ok, bool* secret_ok) {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    Spawned proc = spawn_store({"--port", "0"});
    for (const auto& [k, v] : env) ::unsetenv(k.c_str());
    std::string banner = read_line(proc.stdout_fd);
    const std::string prefix = "kolo-store: listening on 127.0.0.1:";
    ASSERT_EQ(banner.rfind(prefix, 0), 0u) << banner;
    auto usable = [&](const std::string& secret) {
      try {
        TCPStore::Options opts;
        opts.port = static_cast<uint16_t>(std::stoi(banner.substr(prefix.size())));
        opts.timeout = Ms(3000);
        opts.secret = secret;
        opts.protocol = TCPStore::Protocol::kValidated;
        auto store = TCPStore::create(opts);
        store->set("k", std::string("v"));
        return store->get_string("k") == "v";
      } catch (const Error&) {
        return false;
      }
    };
    *plain_ok = usable("");
    *secret_ok = usable("cli secret");
    ::kill(proc.pid, SIGTERM);
    EXPECT_EQ(wait_child(proc.pid, Ms(5000)), 0);
    ::close(proc.stdout_fd);
  };
  bool plain = true, with_secret = false;
  serve({{"KOLO_SECRET", "cli secret"}}, &plain, &with_secret);
  EXPECT_FALSE(plain) << "kolo-store with KOLO_SECRET served a client without it";
  EXPECT_TRUE(with_secret);
  serve({{"KOLO_SECRET", "cli secret"}, {"KOLO_STORE_AUTH", "off"}}, &plain, &with_secret);
  EXPECT_TRUE(plain) << "KOLO_STORE_AUTH=off must serve c10d clients";
  EXPECT_FALSE(with_secret) << "a client with a secret must refuse an unauthenticated store";

  ::setenv("KOLO_STORE_AUTH", "on", 1);
  Spawned no_secret = spawn_store({"--port", "0"});
  ::unsetenv("KOLO_STORE_AUTH");
  EXPECT_EQ(wait_child(no_secret.pid, Ms(5000)), 2);
  ::close(no_secret.stdout_fd);
}

// Everything on stdout until it closes (bounded).
std::string read_all(int fd, Ms limit = Ms(5000)) {
  std::string text;
  for (std::string line; !(line = read_line(fd, limit)).empty();) text += line;
  return text;
}

TEST(KoloStoreCli, HelpListsEveryFlagAndValuesMayBeAttached) {
  Spawned help = spawn_store({"--help"});
  const std::string text = read_all(help.stdout_fd);
  EXPECT_EQ(wait_child(help.pid, Ms(5000)), 0);
  ::close(help.stdout_fd);
  for (const char* flag : {"usage: kolo-store", "--host", "--port", "-h,--help", "-V,--version", "KOLO_SECRET"})
    EXPECT_NE(text.find(flag), std::string::npos) << flag << " is not in --help:\n" << text;

  Spawned attached = spawn_store({"--host=127.0.0.1", "--port=0"});
  const std::string banner = read_line(attached.stdout_fd);
  EXPECT_EQ(banner.rfind("kolo-store: listening on 127.0.0.1:", 0), 0u) << banner;
  ::kill(attached.pid, SIGTERM);
  EXPECT_EQ(wait_child(attached.pid, Ms(5000)), 0);
  ::close(attached.stdout_fd);
}

TEST(KoloStoreCli, RefusesBadArguments) {
  Spawned bad_port = spawn_store({"--port", "99999"});
  EXPECT_EQ(wait_child(bad_port.pid, Ms(5000)), 2);
  ::close(bad_port.stdout_fd);
  Spawned unknown = spawn_store({"--frobnicate"});
  EXPECT_EQ(wait_child(unknown.pid, Ms(5000)), 2);
  ::close(unknown.stdout_fd);
  Spawned no_value = spawn_store({"--port"});
  EXPECT_EQ(wait_child(no_value.pid, Ms(5000)), 2);
  ::close(no_value.stdout_fd);
  Spawned positional = spawn_store({"29500"});
  EXPECT_EQ(wait_child(positional.pid, Ms(5000)), 2);
  ::close(positional.stdout_fd);
}

}  // namespace
}  // namespace kolo

// Helpers shared by the store tests: stopwatches, forked children with bounded waits, scratch
// directories, free ports and scoped environment variables.
#pragma once
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace kolo::store_test {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// How late a timed-out wait may return: generous because the CI's 2 cores are shared.
constexpr Ms kTimeoutSlack{300};

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  Ms elapsed() const {
    return std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start_);
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Runs `body` in a forked child, which exits 0 when it returns true, 1 when false, 2 when it
// throws. The child never returns into the test framework.
inline pid_t fork_child(const std::function<bool()>& body) {
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int code = 2;
    try {
      code = body() ? 0 : 1;
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  return pid;
}

// The child's exit code, or -1 if it had to be killed after `timeout` or died from a signal.
inline int wait_child(pid_t pid, Ms timeout = Ms(10000)) {
  Stopwatch clock;
  for (;;) {
    int status = 0;
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (clock.elapsed() > timeout) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(Ms(5));
  }
}

// A fresh directory under $TMPDIR, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kolo-store-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A port nobody listens on right now (bound once, then released).
inline uint16_t unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Sets/unsets environment variables for one test and restores the previous values after.
class ScopedEnv {
 public:
  ScopedEnv& set(const std::string& name, const std::string& value) {
    remember(name);
    ::setenv(name.c_str(), value.c_str(), 1);
    return *this;
  }
  ScopedEnv& unset(const std::string& name) {
    remember(name);
    ::unsetenv(name.c_str());
    return *this;
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  void remember(const std::string& name) {
    if (saved_.count(name)) return;
    const char* old = ::getenv(name.c_str());
    saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace kolo::store_test

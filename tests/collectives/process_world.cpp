#include "process_world.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace kolo::coltest {

struct ProcessWorld::Child {
  RankOutcome outcome;
  std::string out_path;
  std::string err_path;
  bool done = false;
};

namespace {

std::string make_capture_file(const char* what, int rank) {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/kolo-coltest-" + what + "-r" +
                        std::to_string(rank) + "-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = mkstemp(name.data());
  if (fd < 0) throw std::runtime_error("mkstemp failed: " + std::string(std::strerror(errno)));
  close(fd);
  return name.data();
}

// The inherited environment with `overrides` applied, as "KEY=VALUE" strings.
std::vector<std::string> build_environment(const Env& overrides) {
  std::vector<std::string> result;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (overrides.count(key) == 0) result.push_back(entry);
  }
  for (const auto& [key, value] : overrides) result.push_back(key + "=" + value);
  return result;
}

std::vector<char*> as_pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

uint16_t pick_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("could not bind a free port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string RankOutcome::describe() const {
  std::ostringstream s;
  s << "rank " << rank << " (pid " << pid << "): ";
  if (killed_at_deadline) {
    s << "still running at the deadline, killed";
  } else if (exited) {
    s << "exit code " << exit_code;
  } else {
    s << "ended by signal " << signal << " (" << strsignal(signal) << ")";
  }
  s << " after " << seconds << " s\n";
  if (!out.empty()) s << "  --- stdout ---\n" << out << (out.back() == '\n' ? "" : "\n");
  if (!err.empty()) s << "  --- stderr ---\n" << err << (err.back() == '\n' ? "" : "\n");
  return s.str();
}

bool WorldOutcome::all_succeeded() const {
  if (deadline_hit) return false;
  for (const RankOutcome& r : ranks)
    if (!r.succeeded()) return false;
  return true;
}

std::string WorldOutcome::describe() const {
  std::ostringstream s;
  s << ranks.size() << " ranks, " << seconds << " s" << (deadline_hit ? ", DEADLINE HIT" : "") << "\n";
  for (const RankOutcome& r : ranks) s << r.describe();
  return s.str();
}

ProcessWorld::ProcessWorld(LaunchSpec spec) : spec_(std::move(spec)) {
  port_ = pick_free_port();
  start_ = std::chrono::steady_clock::now();
  for (int rank = 0; rank < spec_.world_size; ++rank) {
    Child child;
    child.outcome.rank = rank;
    child.out_path = make_capture_file("out", rank);
    child.err_path = make_capture_file("err", rank);

    Env env = spec_.env;
    env["RANK"] = std::to_string(rank);
    env["LOCAL_RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(spec_.world_size);
    env["LOCAL_WORLD_SIZE"] = std::to_string(spec_.world_size);
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = std::to_string(port_);
    if (spec_.rank_env) {
      for (const auto& [key, value] : spec_.rank_env(rank)) env[key] = value;
    }
    std::vector<std::string> env_strings = build_environment(env);
    std::vector<char*> envp = as_pointers(env_strings);
    std::vector<std::string> arg_strings{spec_.program};
    arg_strings.insert(arg_strings.end(), spec_.args.begin(), spec_.args.end());
    std::vector<char*> argv = as_pointers(arg_strings);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, child.out_path.c_str(), O_WRONLY | O_TRUNC, 0);
    posix_spawn_file_actions_addopen(&actions, 2, child.err_path.c_str(), O_WRONLY | O_TRUNC, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, spec_.program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      children_.push_back(std::move(child));
      throw std::runtime_error("posix_spawn " + spec_.program + " failed: " + std::strerror(rc));
    }
    child.outcome.pid = pid;
    children_.push_back(std::move(child));
  }
}

ProcessWorld::~ProcessWorld() {
  for (Child& c : children_) {
    if (!c.done && c.outcome.pid > 0) {
      kill(c.outcome.pid, SIGKILL);
      waitpid(c.outcome.pid, nullptr, 0);
    }
    unlink(c.out_path.c_str());
    unlink(c.err_path.c_str());
  }
}

double ProcessWorld::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string ProcessWorld::read_file(const std::string& path) const {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool ProcessWorld::wait_for_stdout(int rank, const std::string& text, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  Child& c = children_.at(static_cast<size_t>(rank));
  while (std::chrono::steady_clock::now() < until) {
    if (read_file(c.out_path).find(text) != std::string::npos) return true;
    reap(false);
    if (c.done) return read_file(c.out_path).find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool ProcessWorld::wait_for_exit(const std::vector<int>& ranks, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    reap(false);
    bool all = true;
    for (int r : ranks) all = all && children_.at(static_cast<size_t>(r)).done;
    if (all) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ProcessWorld::send_signal(int rank, int sig) {
  Child& c = children_.at(static_cast<size_t>(rank));
  if (!c.done) kill(c.outcome.pid, sig);
}

// Collects every rank that has ended; with block_until_deadline, keeps polling until all have
// ended or the deadline passes, then kills the rest.
void ProcessWorld::reap(bool block_until_deadline) {
  const auto deadline = start_ + spec_.deadline;
  for (;;) {
    bool all_done = true;
    for (Child& c : children_) {
      if (c.done) continue;
      int status = 0;
      const pid_t r = waitpid(c.outcome.pid, &status, WNOHANG);
      if (r == c.outcome.pid) {
        c.done = true;
        c.outcome.seconds = elapsed();
        c.outcome.exited = WIFEXITED(status);
        c.outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        c.outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      } else {
        all_done = false;
      }
    }
    if (all_done || !block_until_deadline) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (Child& c : children_) {
        if (c.done) continue;
        kill(c.outcome.pid, SIGKILL);
        waitpid(c.outcome.pid, nullptr, 0);
        c.done = true;
        c.outcome.killed_at_deadline = true;
        c.outcome.seconds = elapsed();
        c.outcome.signal = SIGKILL;
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

WorldOutcome ProcessWorld::wait() {
  reap(true);
  WorldOutcome result;
  result.seconds = elapsed();
  for (Child& c : children_) {
    c.outcome.out = read_file(c.out_path);
    c.outcome.err = read_file(c.err_path);
    result.deadline_hit = result.deadline_hit || c.outcome.killed_at_deadline;
    result.ranks.push_back(c.outcome);
  }
  return result;
}

WorldOutcome run_world(const LaunchSpec& spec) {
  WorldOutcome outcome;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ProcessWorld world(spec);
    outcome = world.wait();
    const std::string& err0 = outcome.ranks.empty() ? std::string() : outcome.ranks[0].err;
    const bool port_taken = err0.find("Address already in use") != std::string::npos ||
                            err0.find("EADDRINUSE") != std::string::npos;
    if (!port_taken) break;
  }
  return outcome;
}

}  // namespace kolo::coltest

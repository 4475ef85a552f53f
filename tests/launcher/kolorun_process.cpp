#include "kolorun_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <stdexcept>

extern char** environ;

namespace kolo::launcher::testing {
namespace {

void set_variable(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  std::erase_if(env, [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
  env.push_back(name + "=" + value);
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

bool ProcessResult::exited() const { return !timed_out && WIFEXITED(wait_status); }
int ProcessResult::exit_code() const { return exited() ? WEXITSTATUS(wait_status) : -1; }

double monotonic_seconds() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string probe_path(const char* env_name) {
  const char* path = std::getenv(env_name);
  if (path == nullptr) throw std::runtime_error(std::string(env_name) + " is not set; run through meson test");
  return path;
}

std::string kolorun_path() { return probe_path("KOLORUN"); }

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::pair<std::string, std::string>>& env_overrides,
                           const std::string& stdin_text) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::erase_if(env, [](const std::string& e) { return e.rfind("KOLO_SECRET=", 0) == 0; });
  set_variable(env, "KOLO_LAUNCH_GRACE", "1");
  for (const auto& [name, value] : env_overrides) set_variable(env, name, value);
  std::vector<std::string> args = argv;
  std::vector<char*> c_args = c_strings(args);
  std::vector<char*> c_env = c_strings(env);

  int out[2], err[2], in[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  // The stdin text is small (a pipe holds 64 KiB), so it can be written before the child runs.
  if (::write(in[1], stdin_text.data(), stdin_text.size()) != static_cast<ssize_t>(stdin_text.size()))
    throw std::runtime_error("cannot write the child's stdin");
  ::close(in[1]);

  start_ = monotonic_seconds();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execve(c_args[0], c_args.data(), c_env.data());
    ::_exit(126);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

ChildProcess::~ChildProcess() {
  if (!waited_ && pid_ > 0) wait(0);
}

ProcessResult ChildProcess::wait(double timeout_seconds) {
  ProcessResult result;
  waited_ = true;
  const double deadline = start_ + timeout_seconds;
  // Read both pipes until EOF: kolorun closes them only when it (and its ranks) are done.
  while (out_fd_ >= 0 || err_fd_ >= 0) {
    std::vector<pollfd> fds;
    if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
    if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
    int left_ms = static_cast<int>((deadline - monotonic_seconds()) * 1000);
    if (left_ms <= 0) {
      result.timed_out = true;
      break;
    }
    int ready = ::poll(fds.data(), fds.size(), left_ms);
    if (ready < 0 && errno != EINTR) break;
    for (const pollfd& p : fds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[8192];
      ssize_t n = ::read(p.fd, buffer, sizeof buffer);
      int& fd = p.fd == out_fd_ ? out_fd_ : err_fd_;
      std::string& sink = p.fd == out_fd_ ? result.out : result.err;
      if (n > 0) {
        sink.append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fd);
        fd = -1;
      }
    }
  }
  if (result.timed_out) ::kill(pid_, SIGKILL);
  // Output closed: the process exits within moments; bound the wait anyway.
  for (;;) {
    pid_t done = ::waitpid(pid_, &result.wait_status, WNOHANG);
    if (done == pid_ || (done < 0 && errno != EINTR)) break;
    if (monotonic_seconds() > deadline + 5) {
      result.timed_out = true;
      ::kill(pid_, SIGKILL);
    }
    ::usleep(2000);
  }
  result.seconds = monotonic_seconds() - start_;
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
  out_fd_ = err_fd_ = -1;
  return result;
}

ProcessResult run_kolorun(const std::vector<std::string>& args,
                          const std::vector<std::pair<std::string, std::string>>& env_overrides,
                          double timeout_seconds, const std::string& stdin_text) {
  std::vector<std::string> argv{kolorun_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess(argv, env_overrides, stdin_text).wait(timeout_seconds);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace kolo::launcher::testing

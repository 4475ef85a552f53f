#include "kolorun/rank_spawner.hpp"

#include <sched.h>

#include <poll.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cerrno>
#include <csignal>

#include "kolo/error.hpp"

extern char** environ;

namespace kolo::launcher {
namespace {

// Exec either replaces the child or fails within microseconds; this bound only guards against
// a child stuck before exec (e.g. on a hung file system), which would otherwise hang kolorun.
constexpr int kExecReportTimeoutMs = 30'000;

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Runs in the forked child: only async-signal-safe calls, no allocation, never returns.
[[noreturn]] void become_rank(const RankLaunch& launch, char* const* argv, char* const* envp,
                              pid_t kolorun_pid, int stdout_fd, int stderr_fd, int report_fd,
                              const SignalPipe& signals) {
  // Also done by the parent: whichever runs first wins, so the group exists before either
  // kolorun signals it or this rank execs.
  ::setpgid(0, launch.process_group);
#ifdef __linux__
  // Die with kolorun even if it is SIGKILLed and cannot clean up. If kolorun died before this
  // line, the death signal will never come: getppid() no longer names it, so give up now.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != kolorun_pid) ::_exit(127);
#else
  (void)kolorun_pid;
#endif
  if (launch.cpu >= 0) {
    // Before exec, so that every thread the program starts inherits it. A refusal (a CPU taken
    // away meanwhile) leaves the rank unbound: slower at worst, never wrong.
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(launch.cpu, &set);
    (void)::sched_setaffinity(0, sizeof set, &set);
  }
  if (launch.stdin_fd >= 0) ::dup2(launch.stdin_fd, STDIN_FILENO);
  if (stdout_fd >= 0) ::dup2(stdout_fd, STDOUT_FILENO);
  if (stderr_fd >= 0) ::dup2(stderr_fd, STDERR_FILENO);
  signals.restore_in_child();

  // execvp looks argv[0] up in PATH as read from environ, so a -x PATH=... applies to it too.
  environ = const_cast<char**>(envp);
  ::execvp(argv[0], argv);

  int error = errno;
  ssize_t ignored = ::write(report_fd, &error, sizeof error);
  (void)ignored;
  ::_exit(127);
}

// Waits for the child's exec report and fills spawned.start_failure if it did not start: EOF
// means exec succeeded (the pipe closed on exec), four bytes are the errno of a failed exec.
void read_exec_report(int fd, const RankLaunch& launch, SpawnedRank& spawned) {
  pollfd p{fd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, kExecReportTimeoutMs);
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) {
    ::kill(spawned.pid, SIGKILL);
    spawned.start_failure = "rank " + std::to_string(launch.rank) + " did not reach exec within " +
                            std::to_string(kExecReportTimeoutMs / 1000) + " s";
    spawned.start_failure_exit_code = 127;
    return;
  }
  int error = 0;
  ssize_t n;
  do {
    n = ::read(fd, &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof error)) return;
  spawned.start_failure = system_error_text("cannot execute '" + launch.argv[0] + "'", error);
  // The shells' convention: 127 for "no such program", 126 for "there but not runnable".
  spawned.start_failure_exit_code = (error == ENOENT || error == ENOTDIR) ? 127 : 126;
}

}  // namespace

SpawnedRank spawn_rank(const RankLaunch& launch, const SignalPipe& signals) {
  // Everything the child needs is prepared here: after fork it may not allocate.
  std::vector<char*> argv = c_strings(launch.argv);
  std::vector<char*> envp = c_strings(launch.env);
  Pipe out, err;
  if (launch.capture_output) {
    out = make_pipe();
    err = make_pipe();
  }
  Pipe report = make_pipe();
  const pid_t kolorun_pid = ::getpid();

  // No handler may run in the child between fork and exec: it would write to kolorun's
  // signal pipe as if kolorun itself had been signalled.
  sigset_t previous_mask = SignalPipe::block_all();
  pid_t pid = ::fork();
  if (pid == 0)
    become_rank(launch, argv.data(), envp.data(), kolorun_pid, out.write_end.get(), err.write_end.get(),
                report.write_end.get(), signals);
  int fork_error = errno;
  SignalPipe::unblock(previous_mask);
  if (pid < 0) throw Error(system_error_text("fork failed", fork_error));

  ::setpgid(pid, launch.process_group == 0 ? pid : launch.process_group);
  SpawnedRank spawned;
  spawned.pid = pid;
  report.write_end.reset();
  out.write_end.reset();
  err.write_end.reset();
  read_exec_report(report.read_end.get(), launch, spawned);
  if (launch.capture_output) {
    set_nonblocking(out.read_end.get());
    set_nonblocking(err.read_end.get());
    spawned.stdout_pipe = std::move(out.read_end);
    spawned.stderr_pipe = std::move(err.read_end);
  }
  return spawned;
}

}  // namespace kolo::launcher

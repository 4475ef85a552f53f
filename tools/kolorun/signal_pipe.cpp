#include "kolorun/signal_pipe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "kolo/error.hpp"
#include "kolorun/fd_util.hpp"

namespace kolo::launcher {
namespace {

// Handler state must be plain globals: a handler can reach nothing else safely.
int g_pipe_read = -1;
int g_pipe_write = -1;
volatile sig_atomic_t g_pending[NSIG] = {};
struct sigaction g_previous[NSIG];

constexpr int kChildSignal = SIGCHLD;

void on_signal(int sig) {
  int saved_errno = errno;
  g_pending[sig] = 1;
  char byte = static_cast<char>(sig);
  // Non-blocking: a full pipe already guarantees a wakeup, so a dropped byte loses nothing.
  ssize_t ignored = ::write(g_pipe_write, &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

void install(int sig, void (*handler)(int), int flags) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = flags;
  if (::sigaction(sig, &action, &g_previous[sig]) != 0)
    throw Error(system_error_text("cannot install a signal handler", errno));
}

}  // namespace

SignalPipe::SignalPipe() {
  if (g_pipe_read >= 0) throw Error("kolorun: only one SignalPipe may exist");
  ::sigprocmask(SIG_SETMASK, nullptr, &original_mask_);
  Pipe pipe = make_pipe();
  set_nonblocking(pipe.read_end.get());
  set_nonblocking(pipe.write_end.get());
  g_pipe_read = pipe.read_end.release();
  g_pipe_write = pipe.write_end.release();
  for (int sig = 0; sig < NSIG; ++sig) g_pending[sig] = 0;
  // SA_NOCLDSTOP: a rank stopped by a debugger or SIGSTOP is not an event for us.
  install(kChildSignal, on_signal, SA_RESTART | SA_NOCLDSTOP);
  for (int sig : kForwardedSignals) install(sig, on_signal, SA_RESTART);
  install(SIGPIPE, SIG_IGN, 0);
}

SignalPipe::~SignalPipe() {
  ::sigaction(SIGPIPE, &g_previous[SIGPIPE], nullptr);
  for (int sig : kForwardedSignals) ::sigaction(sig, &g_previous[sig], nullptr);
  ::sigaction(kChildSignal, &g_previous[kChildSignal], nullptr);
  ::close(g_pipe_read);
  ::close(g_pipe_write);
  g_pipe_read = g_pipe_write = -1;
}

int SignalPipe::read_fd() const { return g_pipe_read; }

std::vector<int> SignalPipe::take_pending() {
  char buffer[256];
  while (::read(g_pipe_read, buffer, sizeof buffer) > 0) {
  }
  std::vector<int> received;
  g_pending[kChildSignal] = 0;
  for (int sig : kForwardedSignals) {
    if (g_pending[sig]) {
      g_pending[sig] = 0;
      received.push_back(sig);
    }
  }
  return received;
}

void SignalPipe::restore_in_child() const {
  // kolorun installs no other handlers before this class, so the previous dispositions are
  // SIG_DFL or SIG_IGN, both meaningful after exec (e.g. "nohup kolorun" keeps SIGHUP ignored).
  ::sigaction(kChildSignal, &g_previous[kChildSignal], nullptr);
  ::sigaction(SIGPIPE, &g_previous[SIGPIPE], nullptr);
  for (int sig : kForwardedSignals) ::sigaction(sig, &g_previous[sig], nullptr);
  ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

sigset_t SignalPipe::block_all() {
  sigset_t all, previous;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &previous);
  return previous;
}

void SignalPipe::unblock(const sigset_t& previous) { ::sigprocmask(SIG_SETMASK, &previous, nullptr); }

}  // namespace kolo::launcher

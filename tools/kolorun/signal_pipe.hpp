// The self-pipe trick: signal handlers only note the signal and write one byte to a pipe, so
// the supervision loop sees signals as an ordinary readable descriptor in poll() and does all
// real work (reaping, forwarding) outside the handler.
#pragma once
#include <signal.h>

#include <vector>

namespace kolo::launcher {

// Signals kolorun passes on to every rank; receiving one also starts an orderly shutdown.
inline constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

class SignalPipe {
 public:
  // Installs handlers for SIGCHLD and kForwardedSignals and ignores SIGPIPE (a closed stdout
  // must not kill the supervisor while ranks still run). Only one may exist at a time.
  SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;
  ~SignalPipe();  // restores the previous dispositions

  int read_fd() const;

  // Empties the pipe and returns the forwarded signals received since the last call, in
  // kForwardedSignals order (order of arrival is not recorded). SIGCHLD is not reported:
  // callers reap on every wakeup anyway.
  std::vector<int> take_pending();

  // For a freshly forked child, before exec: the dispositions kolorun started with for every
  // signal this class touched (exec keeps SIG_IGN, so SIGPIPE would otherwise stay ignored in
  // the rank) and the signal mask kolorun started with. Async-signal-safe.
  void restore_in_child() const;

  // Blocks every signal; the returned mask is what to restore with unblock(). Used around
  // fork() so no handler runs in the child before it has reset them.
  static sigset_t block_all();
  static void unblock(const sigset_t& previous);

  // The mask kolorun was started with (what the ranks get).
  const sigset_t& original_mask() const { return original_mask_; }

 private:
  sigset_t original_mask_;
};

}  // namespace kolo::launcher

// The supervision loop: starts the ranks, copies their tagged output, reaps them, forwards
// signals, and runs the shutdown sequence (grace period, SIGTERM, SIGKILL) when a rank fails,
// the job times out or kolorun is asked to stop.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kolorun/job_environment.hpp"
#include "kolorun/options.hpp"
#include "kolorun/rank_spawner.hpp"
#include "kolorun/signal_pipe.hpp"
#include "kolorun/store_host.hpp"
#include "kolorun/tagged_stream.hpp"

namespace kolo::launcher {

class JobSupervisor {
 public:
  JobSupervisor(const LaunchOptions& options, double grace_seconds);

  // Runs the job to completion and returns kolorun's exit code: 0 when every rank exited 0;
  // otherwise decided by the first thing that went wrong: a rank's exit status (128+signal if
  // it was killed), 124 for --timeout, 128+signal when kolorun was signalled, 126/127 when the
  // program could not be started.
  int run();

 private:
  using Clock = std::chrono::steady_clock;

  // How far the shutdown has gone. Only moves forward.
  enum class Phase {
    kRunning,         // nothing wrong yet
    kGraceForOthers,  // a rank failed; the others may still exit on their own
    kTerminating,     // SIGTERM (or a forwarded signal) sent; waiting one grace period
    kKilling,         // SIGKILL sent; waiting for the kernel to finish them
  };

  struct Rank {
    int rank = 0;
    pid_t pid = -1;
    bool reaped = false;
    bool failed_to_start = false;
    std::unique_ptr<TaggedStream> out;
    std::unique_ptr<TaggedStream> err;
  };

  void start_ranks();
  // --replace: starts the replacements on_rank_end queued (after reaping: ranks_ may grow).
  void start_replacements();
  void wait_for_events();
  void handle_received_signals();
  void reap_ranks();
  void on_rank_end(Rank& rank, int wait_status);
  void handle_deadlines();
  void send_to_running_ranks(int sig, const std::string& message);  // message: printed first
  void enter_phase(Phase phase, Clock::duration wait);
  void finish_streams();

  std::optional<Clock::time_point> next_deadline() const;
  int running_count() const;
  bool streams_open() const;
  void set_exit_code(int code);
  static void note(const std::string& message);
  Rank& track(int r, SpawnedRank& spawned);

  const LaunchOptions& options_;
  const Clock::duration grace_;
  const std::string grace_text_;
  SignalPipe signals_;
  std::vector<Rank> ranks_;
  pid_t process_group_ = 0;
  Phase phase_ = Phase::kRunning;
  std::optional<Clock::time_point> phase_deadline_;
  std::optional<Clock::time_point> timeout_deadline_;
  std::optional<Clock::time_point> drain_deadline_;
  bool gave_up_ = false;  // ranks survived SIGKILL past every bound
  std::optional<int> exit_code_;
  HostedStore store_;  // the job's store, for a job on this host (store_host.hpp)
  // --elastic: ranks ended by a signal are losses the job survives; the first one's exit code
  // counts only if no rank exits 0.
  std::optional<int> first_loss_code_;
  bool any_rank_succeeded_ = false;
  // --replace: how each launch rank was started (a replacement starts the same way, joining),
  // the lost ranks waiting for one, and how many replacements were started.
  std::vector<RankLaunch> launches_;
  std::vector<int> pending_replacements_;
  int replacements_started_ = 0;
};

}  // namespace kolo::launcher

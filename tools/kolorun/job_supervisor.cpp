#include "kolorun/job_supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "kolo/error.hpp"
#include "kolorun/host_list.hpp"
#include "kolorun/rank_spawner.hpp"
#include "kolorun/wait_status.hpp"

namespace kolo::launcher {
namespace {

// After SIGKILL only the kernel can delay a rank's end (e.g. uninterruptible I/O); this bounds
// how long kolorun keeps waiting before it reports them and exits anyway.
constexpr std::chrono::seconds kKillWait{10};

constexpr int kTimeoutExitCode = 124;  // as timeout(1)

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

std::string count_ranks(int count) { return std::to_string(count) + (count == 1 ? " rank" : " ranks"); }

}  // namespace

JobSupervisor::JobSupervisor(const LaunchOptions& options, double grace_seconds)
    : options_(options),
      grace_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_seconds))),
      grace_text_(format_seconds(grace_seconds)) {}

int JobSupervisor::run() {
  if (options_.timeout_seconds)
    timeout_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(*options_.timeout_seconds));
  start_ranks();
  while (!gave_up_ && (running_count() > 0 || streams_open())) {
    if (running_count() == 0 && !drain_deadline_) {
      // Every rank is gone but something it started still holds its output pipe open.
      drain_deadline_ = Clock::now() + grace_;
    }
    wait_for_events();
    handle_received_signals();
    reap_ranks();
    start_replacements();
    handle_deadlines();
  }
  finish_streams();
  if (!exit_code_ && first_loss_code_ && !any_rank_succeeded_) return *first_loss_code_;
  return exit_code_.value_or(0);
}

void JobSupervisor::start_ranks() {
  JobIdentity identity = make_job_identity(options_);
  // kolorun hosts the store for a job on this host, and with --hosts where --store-addr names an
  // address of this machine the hosts reach; otherwise rank 0 serves it, and dies with it.
  if (options_.hosts.empty() || !options_.store_addr.empty()) {
    try {
      store_ = host_store(options_.store_addr.empty() ? "127.0.0.1" : options_.store_addr,
                          store_secret(options_, identity.secret));
    } catch (const Error& e) {
      note(e.what());
      set_exit_code(1);
      return;
    }
    identity.store_addr = store_.address;
  } else if (options_.elastic) {
    note("--elastic with --hosts: rank 0 serves the store, so the others cannot shrink past its loss "
         "(--store-addr has kolorun serve it)");
  }
  const std::vector<std::string> base_env = current_environment();

  // Only one rank can sensibly own a terminal's input, and a rank reading the terminal from
  // kolorun's separate process group would be stopped by SIGTTIN. So rank 0 inherits a piped
  // or redirected stdin, and every other rank (and rank 0 on a terminal) reads /dev/null.
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) throw Error(system_error_text("cannot open /dev/null", errno));
  const bool rank0_inherits_stdin = !::isatty(STDIN_FILENO);

  ranks_.reserve(static_cast<size_t>(options_.nproc));
  for (int r = 0; r < options_.nproc; ++r) {
    RankLaunch launch;
    launch.rank = r;
    if (options_.hosts.empty()) {
      launch.argv = options_.program;
    } else {
      launch.argv = remote_command(options_.launch_agent, place_rank(options_.hosts, r).host,
                                   launch_variables(options_, identity, r), options_.program);
    }
    launch.env = rank_environment(base_env, options_, identity, r);
    launch.process_group = process_group_;
    launch.capture_output = options_.tag_output;
    launch.stdin_fd = (r == 0 && rank0_inherits_stdin) ? -1 : dev_null.get();
    launch.cpu = options_.rank_cpus.empty() ? -1 : options_.rank_cpus[static_cast<size_t>(r)];

    if (options_.replace > 0) {
      launches_.push_back(launch);
      launches_.back().stdin_fd = -1;  // the /dev/null below is closed by then: a replacement opens its own
      // On another host the agent's command carries the variables (start_replacements sets
      // KOLO_JOIN in the environment of a rank started here).
      if (!options_.hosts.empty()) {
        std::vector<std::string> variables = launch_variables(options_, identity, r);
        variables.emplace_back("KOLO_JOIN=1");
        launches_.back().argv = remote_command(options_.launch_agent, place_rank(options_.hosts, r).host, variables,
                                               options_.program);
      }
    }
    SpawnedRank spawned;
    try {
      spawned = spawn_rank(launch, signals_);
    } catch (const Error& e) {
      note("cannot start rank " + std::to_string(r) + ": " + e.what());
      set_exit_code(1);
      send_to_running_ranks(SIGTERM, "stopping the " + count_ranks(running_count()) + " already started");
      enter_phase(Phase::kTerminating, grace_);
      return;
    }

    Rank& rank = track(r, spawned);
    if (process_group_ == 0) process_group_ = spawned.pid;

    if (!spawned.start_failure.empty()) {
      // Every rank runs the same program, so one failure means none can start: stop here.
      rank.failed_to_start = true;
      note(spawned.start_failure);
      set_exit_code(spawned.start_failure_exit_code);
      if (r > 0) send_to_running_ranks(SIGTERM, "stopping the " + count_ranks(r) + " already started");
      enter_phase(Phase::kTerminating, grace_);
      return;
    }
  }
}

// A started process, launch rank `r` or its replacement, watched from now on: its pid, and its
// output tagged when kolorun captures it.
JobSupervisor::Rank& JobSupervisor::track(int r, SpawnedRank& spawned) {
  Rank& rank = ranks_.emplace_back();
  rank.rank = r;
  rank.pid = spawned.pid;
  if (spawned.stdout_pipe.valid())
    rank.out = std::make_unique<TaggedStream>(std::move(spawned.stdout_pipe), r, STDOUT_FILENO);
  if (spawned.stderr_pipe.valid())
    rank.err = std::make_unique<TaggedStream>(std::move(spawned.stderr_pipe), r, STDERR_FILENO);
  return rank;
}

void JobSupervisor::start_replacements() {
  std::vector<int> lost = std::move(pending_replacements_);
  pending_replacements_.clear();
  for (int r : lost) {
    // Not once kolorun is stopping the job, nor when the ranks it would join are all gone.
    if (phase_ != Phase::kRunning || running_count() == 0) return;
    RankLaunch launch = launches_.at(static_cast<size_t>(r));
    const std::string join = "KOLO_JOIN=";
    std::erase_if(launch.env, [&](const std::string& e) { return e.rfind(join, 0) == 0; });
    launch.env.push_back(join + "1");
    UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    launch.stdin_fd = dev_null.valid() ? dev_null.get() : -1;
    launch.process_group = process_group_;
    SpawnedRank spawned;
    try {
      spawned = spawn_rank(launch, signals_);
    } catch (const Error& e) {
      note("--replace: cannot start a replacement for rank " + std::to_string(r) + ": " + e.what());
      continue;
    }
    ++replacements_started_;
    Rank& rank = track(r, spawned);
    if (!spawned.start_failure.empty()) {
      rank.failed_to_start = true;
      note("--replace: " + spawned.start_failure);
      continue;
    }
    note("--replace: started a replacement for rank " + std::to_string(r) + " (pid " + std::to_string(spawned.pid) +
         ", KOLO_JOIN=1; " + std::to_string(replacements_started_) + " of at most " + std::to_string(options_.replace) + ")");
  }
}

void JobSupervisor::wait_for_events() {
  std::vector<pollfd> fds;
  std::vector<TaggedStream*> streams;
  fds.push_back({signals_.read_fd(), POLLIN, 0});
  streams.push_back(nullptr);
  for (Rank& rank : ranks_) {
    for (TaggedStream* stream : {rank.out.get(), rank.err.get()}) {
      if (stream == nullptr || !stream->open()) continue;
      fds.push_back({stream->fd(), POLLIN, 0});
      streams.push_back(stream);
    }
  }

  int timeout_ms = -1;  // without deadlines only a signal or output can change anything
  if (auto deadline = next_deadline()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
    timeout_ms = static_cast<int>(std::clamp<decltype(left)>(left, 0, 60'000));
  }
  int ready = ::poll(fds.data(), fds.size(), timeout_ms);
  if (ready < 0) {
    if (errno == EINTR) return;
    throw Error(std::string("poll failed: ") + std::strerror(errno));
  }
  for (size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) streams[i]->on_readable();
}

void JobSupervisor::handle_received_signals() {
  for (int sig : signals_.take_pending()) {
    set_exit_code(128 + sig);
    if (running_count() == 0) {
      drain_deadline_ = Clock::now();  // only output is left; stop waiting for it
      continue;
    }
    send_to_running_ranks(sig, "received " + signal_name(sig) + "; forwarding it to " +
                                   count_ranks(running_count()));
    if (phase_ < Phase::kTerminating) enter_phase(Phase::kTerminating, grace_);
  }
}

void JobSupervisor::reap_ranks() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;  // 0: nobody else has ended; -1 (ECHILD): no children left
    for (Rank& rank : ranks_) {
      if (rank.pid == pid && !rank.reaped) {
        rank.reaped = true;
        on_rank_end(rank, status);
        break;
      }
    }
  }
}

void JobSupervisor::on_rank_end(Rank& rank, int wait_status) {
  if (!rank.failed_to_start && exited_successfully(wait_status)) any_rank_succeeded_ = true;
  if (rank.failed_to_start || exited_successfully(wait_status)) return;
  // Once kolorun has signalled the ranks, their ends are its own doing, not news.
  if (phase_ >= Phase::kTerminating) return;
  note(describe_rank_end(rank.rank, rank.pid, wait_status));
  if (options_.elastic && phase_ == Phase::kRunning) {
    // The survivors may shrink their group and carry on: leave them be. A rank killed by a
    // signal is a loss the job may survive; one that exits non-zero reports a failure.
    if (WIFSIGNALED(wait_status)) {
      if (!first_loss_code_) first_loss_code_ = exit_code_of(wait_status);
      // Someone must be left to grow the group back.
      if (replacements_started_ + static_cast<int>(pending_replacements_.size()) < options_.replace && running_count() > 0)
        pending_replacements_.push_back(rank.rank);
    } else {
      set_exit_code(exit_code_of(wait_status));
    }
    if (running_count() > 0) note("--elastic: the other " + count_ranks(running_count()) + " keep running");
    return;
  }
  set_exit_code(exit_code_of(wait_status));
  if (phase_ == Phase::kRunning && running_count() > 0) {
    note("waiting up to " + grace_text_ + " for the other " + count_ranks(running_count()) +
         " to exit");
    enter_phase(Phase::kGraceForOthers, grace_);
  }
}

void JobSupervisor::handle_deadlines() {
  const auto now = Clock::now();
  if (drain_deadline_ && now >= *drain_deadline_ && running_count() == 0) finish_streams();
  if (running_count() == 0) return;

  if (timeout_deadline_ && now >= *timeout_deadline_ && phase_ < Phase::kTerminating) {
    set_exit_code(kTimeoutExitCode);
    send_to_running_ranks(SIGTERM, "job exceeded --timeout of " + format_seconds(*options_.timeout_seconds) +
                                       "; sending SIGTERM to " + count_ranks(running_count()));
    enter_phase(Phase::kTerminating, grace_);
    return;
  }
  if (!phase_deadline_ || now < *phase_deadline_) return;
  switch (phase_) {
    case Phase::kRunning:
      break;
    case Phase::kGraceForOthers:
      send_to_running_ranks(SIGTERM, "grace period of " + grace_text_ + " is over; sending SIGTERM to " +
                                         count_ranks(running_count()));
      enter_phase(Phase::kTerminating, grace_);
      break;
    case Phase::kTerminating:
      send_to_running_ranks(SIGKILL, count_ranks(running_count()) + " still running " + grace_text_ +
                                         " after SIGTERM; sending SIGKILL");
      enter_phase(Phase::kKilling, kKillWait);
      break;
    case Phase::kKilling:
      note(count_ranks(running_count()) + " still not gone " + std::to_string(kKillWait.count()) +
           " s after SIGKILL; giving up on them");
      set_exit_code(1);
      gave_up_ = true;
      break;
  }
}

void JobSupervisor::send_to_running_ranks(int sig, const std::string& message) {
  if (running_count() == 0) return;
  note(message);
  // The whole group, so processes the ranks started get it too. Safe while any rank is
  // unreaped: even as a zombie it keeps the group id from being reused.
  if (::killpg(process_group_, sig) != 0 && errno != ESRCH)
    note(std::string("cannot signal the ranks: ") + std::strerror(errno));
}

void JobSupervisor::enter_phase(Phase phase, Clock::duration wait) {
  phase_ = phase;
  phase_deadline_ = Clock::now() + wait;
}

void JobSupervisor::finish_streams() {
  for (Rank& rank : ranks_) {
    for (TaggedStream* stream : {rank.out.get(), rank.err.get()}) {
      if (stream == nullptr || !stream->open()) continue;
      stream->on_readable();  // whatever is already in the pipe still gets out
      if (stream->open()) stream->finish();
    }
  }
}

std::optional<JobSupervisor::Clock::time_point> JobSupervisor::next_deadline() const {
  std::optional<Clock::time_point> next;
  auto consider = [&](const std::optional<Clock::time_point>& t) {
    if (t && (!next || *t < *next)) next = t;
  };
  if (running_count() > 0) {
    if (phase_ < Phase::kTerminating) consider(timeout_deadline_);
    if (phase_ != Phase::kRunning) consider(phase_deadline_);
  } else {
    consider(drain_deadline_);
  }
  return next;
}

int JobSupervisor::running_count() const {
  return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return !r.reaped; }));
}

bool JobSupervisor::streams_open() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
    return (r.out && r.out->open()) || (r.err && r.err->open());
  });
}

void JobSupervisor::set_exit_code(int code) {
  if (!exit_code_) exit_code_ = code;
}

void JobSupervisor::note(const std::string& message) {
  std::string line = "kolorun: " + message + "\n";
  write_all(STDERR_FILENO, line);
}

}  // namespace kolo::launcher

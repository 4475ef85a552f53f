// Test-driver side: starts N real processes of a program as the ranks of one job (RANK,
// WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=<a free port picked per launch>), captures
// each rank's stdout and stderr, and waits for them with a hard bound: past the deadline every
// rank still running is SIGKILLed and the result says so, so a hang fails a test instead of
// hanging CI.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kolo::coltest {

using Env = std::map<std::string, std::string>;

struct LaunchSpec {
  std::string program;
  std::vector<std::string> args;
  int world_size = 2;
  Env env;                                    // set for every rank (overrides the inherited environment)
  std::function<Env(int rank)> rank_env;      // optional, per rank (overrides `env`)
  std::chrono::milliseconds deadline{60000};  // from launch until every rank must have exited
};

struct RankOutcome {
  int rank = 0;
  pid_t pid = -1;
  bool exited = false;      // exited normally (exit_code is valid)
  int exit_code = -1;
  int signal = 0;           // the signal that ended it, when it did not exit normally
  bool killed_at_deadline = false;
  double seconds = 0;       // from launch until it ended
  std::string out;
  std::string err;

  bool succeeded() const { return exited && exit_code == 0; }
  std::string describe() const;  // one line plus its output, for assertion messages
};

struct WorldOutcome {
  std::vector<RankOutcome> ranks;
  bool deadline_hit = false;
  double seconds = 0;

  bool all_succeeded() const;
  std::string describe() const;
};

class ProcessWorld {
 public:
  explicit ProcessWorld(LaunchSpec spec);  // starts every rank
  ProcessWorld(const ProcessWorld&) = delete;
  ProcessWorld& operator=(const ProcessWorld&) = delete;
  ~ProcessWorld();  // SIGKILLs and reaps whatever still runs, removes the capture files

  // Polls rank's stdout until it contains `text`; false if the timeout passes or the rank ends.
  bool wait_for_stdout(int rank, const std::string& text, std::chrono::milliseconds timeout);
  // Waits until every listed rank has ended; false if the timeout passes first.
  bool wait_for_exit(const std::vector<int>& ranks, std::chrono::milliseconds timeout);
  void send_signal(int rank, int sig);
  // Seconds since launch (the same clock as RankOutcome::seconds).
  double elapsed() const;
  // Waits for every rank (bounded by the spec's deadline) and collects the outcomes.
  WorldOutcome wait();

  uint16_t port() const { return port_; }

 private:
  struct Child;
  void reap(bool block_until_deadline);
  std::string read_file(const std::string& path) const;

  LaunchSpec spec_;
  uint16_t port_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::vector<Child> children_;
};

// Starts a world and waits for it; relaunches (up to 3 times, with a new port) when rank 0
// could not bind the port it was given, which another test may have taken in between.
WorldOutcome run_world(const LaunchSpec& spec);

// A TCP port on 127.0.0.1 that was free a moment ago.
uint16_t pick_free_port();

}  // namespace kolo::coltest

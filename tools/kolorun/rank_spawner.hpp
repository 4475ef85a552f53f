// Starting one rank: fork, join the job's process group, arrange to die with kolorun, wire up
// stdio, exec. Exec failures are reported back through a close-on-exec pipe so kolorun can say
// "program not found" instead of seeing an anonymous exit status 127.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "kolorun/fd_util.hpp"
#include "kolorun/signal_pipe.hpp"

namespace kolo::launcher {

struct RankLaunch {
  int rank = 0;
  std::vector<std::string> argv;  // argv[0] is looked up in the rank's PATH
  std::vector<std::string> env;   // "NAME=VALUE"
  pid_t process_group = 0;        // 0: the rank becomes the leader of a new group
  bool capture_output = false;    // stdout/stderr to pipes (for tagging) instead of inherited
  int stdin_fd = -1;              // descriptor to use as the rank's stdin; -1 inherits kolorun's
  int cpu = -1;                   // the CPU the rank is bound to (--bind-to); -1: unbound
};

struct SpawnedRank {
  pid_t pid = -1;
  // Set when the program could not be started (e.g. "cannot execute 'prog': No such file or
  // directory"); the child has then exited or been killed and only needs reaping.
  std::string start_failure;
  int start_failure_exit_code = 0;  // 127: not found, 126: found but not executable
  UniqueFd stdout_pipe;  // read ends, non-blocking; invalid unless capture_output
  UniqueFd stderr_pipe;
};

// Throws kolo::Error when no process could be created (fork or pipe failure). A failed exec is
// not an exception: the child exists and must still be reaped.
SpawnedRank spawn_rank(const RankLaunch& launch, const SignalPipe& signals);

}  // namespace kolo::launcher

// Turning a waitpid() status into words and into kolorun's own exit code.
#pragma once
#include <sys/types.h>

#include <string>

namespace kolo::launcher {

bool exited_successfully(int wait_status);

// "rank 2 (pid 1234) exited with status 3" or
// "rank 2 (pid 1234) was killed by signal 9 (Killed)".
std::string describe_rank_end(int rank, pid_t pid, int wait_status);

// The exit status itself, or 128+signal for a killed process, as shells report it.
int exit_code_of(int wait_status);

// "SIGTERM (Terminated)" style name for messages.
std::string signal_name(int sig);

}  // namespace kolo::launcher

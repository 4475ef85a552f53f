#include "kolorun/wait_status.hpp"

#include <sys/wait.h>

#include <csignal>
#include <cstring>

namespace kolo::launcher {
namespace {

const char* abbreviation(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGKILL: return "SIGKILL";
    default: return nullptr;
  }
}

}  // namespace

bool exited_successfully(int wait_status) { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

std::string describe_rank_end(int rank, pid_t pid, int wait_status) {
  std::string text = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") ";
  if (WIFEXITED(wait_status)) return text + "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    text += "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig);
    if (WCOREDUMP(wait_status)) text += ", core dumped";
    return text + ")";
  }
  return text + "ended with wait status " + std::to_string(wait_status);
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string signal_name(int sig) {
  const char* name = abbreviation(sig);
  return (name != nullptr ? std::string(name) : "signal " + std::to_string(sig)) + " (" + ::strsignal(sig) + ")";
}

}  // namespace kolo::launcher

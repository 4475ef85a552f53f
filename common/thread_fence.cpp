#include "common/thread_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/config.hpp"
#include "common/log.hpp"

namespace kolo {

long membarrier_call(int cmd) { return ::syscall(__NR_membarrier, cmd, 0, 0); }

bool membarrier_register(int cmd, int register_cmd, const char* fallback) {
  const long supported = membarrier_call(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || !(supported & cmd) || !(supported & register_cmd)) {
    KOLO_LOG(debug, "membarrier command " << cmd << " is missing: " << fallback);
    return false;
  }
  if (membarrier_call(register_cmd) != 0) {
    KOLO_LOG(debug, "membarrier registration failed (" << std::strerror(errno) << "): " << fallback);
    return false;
  }
  return true;
}

namespace {

// Decided once per process (pid): a lock made before a fork() must not change sides in the child.
struct Registration {
  std::mutex mu;
  pid_t pid = 0;
  bool ok = false;
};
Registration& registration() {
  static Registration r;
  return r;
}

}  // namespace

bool asymmetric_thread_fences() {
  Registration& r = registration();
  std::lock_guard<std::mutex> lk(r.mu);
  if (r.pid != ::getpid()) {
    r.ok = config::get_int("KOLO_ASYMMETRIC_FENCE") != 0 &&
           membarrier_register(MEMBARRIER_CMD_PRIVATE_EXPEDITED, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                               "the run lock is given back with an exchange");
    r.pid = ::getpid();
  }
  return r.ok;
}

void heavy_thread_fence() {
  if (membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
  // Not registered in this process: a child fork()ed after a lock chose its side. Register here.
  if (asymmetric_thread_fences() && membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
  // Membarrier is missing (then no lock chose the light side, and this thread's own fence is all
  // its protocol needs), or cannot be had in this child: its sleepers wake up by their timeouts.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace kolo

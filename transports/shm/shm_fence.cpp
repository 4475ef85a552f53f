#include "transports/shm/shm_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/config.hpp"
#include "common/thread_fence.hpp"
#include "common/log.hpp"

namespace kolo::shm {

bool asymmetric_fences() {
  if (config::get_int("KOLO_SHM_ASYMMETRIC_FENCE") == 0) return false;
  // Once per process: the registration belongs to the address space, and a child made by fork()
  // (without exec) starts unregistered though it inherits our memory, so the pid is kept too.
  static std::mutex mu;
  static pid_t registered_pid = 0;
  static bool registered = false;
  std::lock_guard<std::mutex> lk(mu);
  if (registered_pid != ::getpid()) {
    registered = membarrier_register(MEMBARRIER_CMD_GLOBAL_EXPEDITED, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
                                     "shm: a fence on every send");
    registered_pid = ::getpid();
  }
  return registered;
}

namespace {
std::atomic<unsigned long> issued{0};
}  // namespace

unsigned long heavy_fences_issued() { return issued.load(std::memory_order_relaxed); }

void heavy_fence() {
  issued.fetch_add(1, std::memory_order_relaxed);
  if (membarrier_call(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return;
  // Cannot happen once registered (the command exists, and its only other error is for an
  // unregistered caller); were it to, the peer's store might stay unseen and this rank sleep
  // until its wait's timeout. Say so once.
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    KOLO_LOG(error, "shm: membarrier(GLOBAL_EXPEDITED) failed (" << std::strerror(errno)
                                                                 << "): a wake-up may be late");
}

}  // namespace kolo::shm

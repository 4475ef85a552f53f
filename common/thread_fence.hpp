// A store-load fence split between threads of one process, for a lock whose common side must not
// pay one (asymmetric_lock.hpp); the shared-memory pairs use its common half too (shm_fence.hpp).
//
// Dekker's pattern (each side stores its flag, then loads the other's) needs a store-load fence
// on both sides. A locked instruction is one, and it is not cheap right after a message was
// published in shared memory: it waits until the message's cache lines, which the peer's core
// polls, have come back to this core (~100 ns here, docs/PERFORMANCE.md). When one side is rare
// and slow anyway (a thread about to sleep), it takes both halves: after storing its flag it asks
// the kernel for a memory barrier on every CPU that runs a thread of this process
// (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED). The common side's store then either happened
// before that barrier (the rare side's load sees it) or its later load comes after it (and sees
// the rare side's flag), and the common side needs only a compiler barrier.
#pragma once

namespace kolo {

// Whether the rare sides below can take both halves: KOLO_ASYMMETRIC_FENCE is not 0, membarrier's
// private expedited command exists, and this process registered for it (on its first call in
// this process; a fork()ed child registers again). The answer stays the same for a process's
// life, so a lock may decide once which protocol it follows.
bool asymmetric_thread_fences();

// The rare side's half: a full memory barrier on every CPU now running a thread of this process.
// When asymmetric_thread_fences() is false, only this thread's (the common side then fences).
void heavy_thread_fence();

// The common side's half: a compiler barrier where the rare side plays heavy_thread_fence(),
// else a real store-load fence.
void light_thread_fence(bool asymmetric);

// membarrier(2)'s `cmd` (with no flags); 0 on success.
long membarrier_call(int cmd);
// Whether `cmd` and `register_cmd` exist and this process registered with `register_cmd` for
// `cmd`; when not, a debug line says why and that `fallback` is what the caller does instead.
bool membarrier_register(int cmd, int register_cmd, const char* fallback);

}  // namespace kolo

#include <atomic>

inline void kolo::light_thread_fence(bool asymmetric) {
  if (asymmetric)
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

// The fences of the sleep/wake handshake between two processes (shm_device.hpp).
//
// A rank about to sleep raises a waiting flag in shared memory and then looks at the ring once
// more; its peer publishes a slot (or frees one) and then looks at the flag. One of the two must
// see the other's store (Dekker's pattern), which takes a store-load fence on both sides. On the
// publishing side that fence is paid on every message, and it is not cheap: it waits until the
// slot's cache lines, last read by the peer's core, are back in this core's cache (70 % of a
// 2-rank broadcast's send time here, docs/PERFORMANCE.md). The sleeping side is rare and slow
// anyway (it makes system calls to sleep), so it takes both halves: after raising its flag it
// asks the kernel for a memory barrier on every CPU that runs a process registered for it
// (membarrier(2), MEMBARRIER_CMD_GLOBAL_EXPEDITED). A publisher's store then either happened
// before that barrier (the sleeper's look finds it) or after it (the publisher's look, which
// comes later in its program, finds the flag), and the publisher needs only a compiler barrier.
// Both processes must play their half: the segment header says whether its owner does
// (kWaiterUsesMembarrier), and a pair uses the light fence only when both do.
#pragma once

namespace kolo::shm {

// Whether this process plays the sleeper's heavy half: KOLO_SHM_ASYMMETRIC_FENCE is not 0,
// membarrier's global expedited command exists, and this process registered for it (on its first
// call in this process).
bool asymmetric_fences();

// The sleeper's half: a full memory barrier on every CPU now running a registered process.
// Only when asymmetric_fences() is true.
void heavy_fence();
// How many heavy_fence() calls this process made (for tests: a rank that arms for sleep with
// nothing to wait for makes none).
unsigned long heavy_fences_issued();

}  // namespace kolo::shm

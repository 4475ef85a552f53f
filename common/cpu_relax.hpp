// A hint to the core that this thread spins on a flag another core will write: it saves power
// and lets a sibling hyper-thread run, without giving up the core as a yield would.
#pragma once

namespace kolo {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace kolo

#include "engine/scratch.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "kolo/error.hpp"

namespace kolo::engine {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void* Scratch::get(size_t bytes, int slot) {
  if (slot < 0 || slot > 64) throw InvalidArgument("scratch slot out of range");
  if (slots_.size() <= static_cast<size_t>(slot)) slots_.resize(static_cast<size_t>(slot) + 1);
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.bytes < bytes || !s.mem) {
    size_t n = (bytes + 63) / 64 * 64;
    if (n == 0) n = 64;
    // A large scratch in huge pages (where transparent huge pages are "madvise", as on Debian):
    // a peer writing into it across processes (shared memory's single copy) pins it page by
    // page, and a large reduction reads it through the TLB. 4 ranks on 2 cores, twoshot
    // all-reduce of 16-64 MiB: 0-12 % faster (docs/PERFORMANCE.md).
    const bool huge = n >= kHugePage;
    if (huge) n = (n + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(huge ? kHugePage : 64, n);
    if (p == nullptr) throw std::bad_alloc();
    if (huge) madvise(p, n, MADV_HUGEPAGE);  // a hint: without it, ordinary pages
    s.mem.reset(p);
    s.bytes = n;
  }
  return s.mem.get();
}

}  // namespace kolo::engine

#include "engine/scratch.hpp"

#include <new>

#include "kolo/error.hpp"

namespace kolo::engine {

void* Scratch::get(size_t bytes, int slot) {
  if (slot < 0 || slot > 64) throw InvalidArgument("scratch slot out of range");
  if (slots_.size() <= static_cast<size_t>(slot)) slots_.resize(static_cast<size_t>(slot) + 1);
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.bytes < bytes || !s.mem) {
    size_t n = (bytes + 63) / 64 * 64;
    if (n == 0) n = 64;
    void* p = std::aligned_alloc(64, n);
    if (p == nullptr) throw std::bad_alloc();
    s.mem.reset(p);
    s.bytes = n;
  }
  return s.mem.get();
}

}  // namespace kolo::engine

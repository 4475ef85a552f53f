// Grow-only scratch buffers owned by a group and lent to the running collective: allocating
// per collective would cost more than small collectives themselves.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

namespace kolo::engine {

class Scratch {
 public:
  // 64-byte aligned, at least `bytes` long; slots never overlap.
  void* get(size_t bytes, int slot);

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<void, Free> mem;
    size_t bytes = 0;
  };
  std::vector<Slot> slots_;
};

}  // namespace kolo::engine

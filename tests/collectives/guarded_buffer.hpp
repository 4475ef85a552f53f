// A typed buffer with guard zones on both sides, so a collective that writes out of bounds is
// caught, and a helper that remembers a buffer's bytes to prove an input was left untouched.
#pragma once
#include <cstddef>
#include <vector>

#include "kolo/types.hpp"

namespace kolo::coltest {

class GuardedBuffer {
 public:
  static constexpr size_t kGuardElements = 16;
  static constexpr unsigned char kGuardByte = 0x5A;
  static constexpr unsigned char kPoisonByte = 0xA5;  // fills the body until inputs are written

  // In the test's memory (test_memory.hpp): host, or device memory the host can read.
  GuardedBuffer(DataType t, size_t count);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  void* data() { return bytes_ + guard_bytes(); }
  const void* data() const { return bytes_ + guard_bytes(); }
  void* element(size_t i) { return static_cast<char*>(data()) + i * dtype_size(dtype_); }
  size_t count() const { return count_; }
  DataType dtype() const { return dtype_; }
  // Whether both guard zones still hold kGuardByte.
  bool guards_intact() const;

 private:
  size_t guard_bytes() const { return kGuardElements * dtype_size(dtype_); }
  DataType dtype_;
  size_t count_;
  unsigned char* bytes_;
};

// A copy of some bytes, to compare with later.
class Snapshot {
 public:
  Snapshot(const void* p, size_t bytes);
  bool unchanged() const;

 private:
  const void* source_;
  std::vector<unsigned char> copy_;
};

}  // namespace kolo::coltest

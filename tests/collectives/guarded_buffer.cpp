#include "guarded_buffer.hpp"

#include <cstring>

#include "test_memory.hpp"

namespace kolo::coltest {

GuardedBuffer::GuardedBuffer(DataType t, size_t count)
    : dtype_(t), count_(count), bytes_(static_cast<unsigned char*>(test_alloc(count * dtype_size(t) + 2 * guard_bytes()))) {
  std::memset(bytes_, kGuardByte, count * dtype_size(t) + 2 * guard_bytes());
  std::memset(data(), kPoisonByte, count * dtype_size(t));
}

GuardedBuffer::~GuardedBuffer() { test_free(bytes_); }

bool GuardedBuffer::guards_intact() const {
  const size_t g = guard_bytes();
  const size_t body = count_ * dtype_size(dtype_);
  for (size_t i = 0; i < g; ++i) {
    if (bytes_[i] != kGuardByte || bytes_[g + body + i] != kGuardByte) return false;
  }
  return true;
}

Snapshot::Snapshot(const void* p, size_t bytes)
    : source_(p), copy_(static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + bytes) {}

bool Snapshot::unchanged() const { return copy_.empty() || std::memcmp(source_, copy_.data(), copy_.size()) == 0; }

}  // namespace kolo::coltest

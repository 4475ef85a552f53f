// Memory handed out by bumping a pointer and taken back all at once by reset(): for what one
// collective needs for its own bookkeeping (lists of requests, block pointers). Blocks are kept
// across resets, so once a group has run its largest collective nothing is allocated again.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace kolo {

class BumpArena {
 public:
  // `bytes` of uninitialised memory, 16-byte aligned, valid until reset().
  void* take(size_t bytes) {
    bytes = (bytes + 15) & ~size_t(15);
    while (block_ < blocks_.size() && used_ + bytes > blocks_[block_].bytes) {
      ++block_;
      used_ = 0;
    }
    if (block_ == blocks_.size()) {
      size_t n = std::max(bytes, blocks_.empty() ? size_t(4096) : 2 * blocks_.back().bytes);
      void* p = std::aligned_alloc(16, n);
      if (p == nullptr) throw std::bad_alloc();
      blocks_.push_back(Block{std::unique_ptr<char, Free>(static_cast<char*>(p)), n});
      used_ = 0;
    }
    char* p = blocks_[block_].mem.get() + used_;
    used_ += bytes;
    return p;
  }
  void reset() {
    block_ = 0;
    used_ = 0;
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  struct Block {
    std::unique_ptr<char, Free> mem;
    size_t bytes;
  };
  std::vector<Block> blocks_;
  size_t block_ = 0, used_ = 0;
};

}  // namespace kolo

// One POSIX shared-memory object mapped into this process: created (exclusively, with its pages
// reserved up front) by the rank that owns it, or opened by a peer that found its name in the
// store. The owner unlinks the name as soon as every peer has mapped it, so nothing is left in
// /dev/shm even if the processes are killed later.
#pragma once
#include <cstddef>
#include <string>

namespace kolo::shm {

// Where POSIX shared-memory names live (shm_open's file system), for messages and tests.
constexpr const char* kShmDir = "/dev/shm";
// Every name this transport creates begins with it.
constexpr const char* kNamePrefix = "kolo-shm-";

class Segment {
 public:
  Segment() = default;
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();  // unmaps; unlinks the name if this process created it and has not unlinked it yet

  // Creates `name` ("/kolo-shm-...") with O_EXCL and `bytes` of reserved, zeroed memory. Throws
  // kolo::Error naming the size and the path when /dev/shm cannot hold it; returns an empty
  // segment (valid() false) if the name exists already, so the caller can pick another.
  static Segment create(const std::string& name, size_t bytes);
  // Maps an existing object read-write. Throws kolo::Error (with `whose` in the message).
  static Segment open(const std::string& name, const std::string& whose);

  void unlink();
  bool valid() const { return base_ != nullptr; }
  char* base() const { return base_; }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  void release();

  std::string name_;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  bool linked_ = false;  // this process created the name and it still exists
};

// Maps `bytes` from `begin` (within a segment this process mapped) into its page tables
// writable now, so that the first message through each slot does not stop on a page fault:
// tmpfs pages are reserved at creation but mapped lazily, one fault per page and process, and
// the first pass through a ring paid one per slot on each side (5-7 us per small message at
// 4 ranks here, where the message itself takes 0.5 us). Best effort: a kernel without
// MADV_POPULATE_WRITE (before 5.14) gets each page read once instead.
void prefault(char* begin, size_t bytes);

}  // namespace kolo::shm

// StandinMemory: device memory played by one shared host mapping (see standin_memory.hpp).
#include "transports/cuda_ipc/standin_memory.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>
#include "kolo/error.hpp"

namespace kolo::cuda_ipc {
namespace {

constexpr size_t kArenaBytes = size_t(16) << 30;  // address space only: pages come on first touch
constexpr size_t kAlign = 256;                     // cudaMalloc's alignment

struct Handle {
  uint64_t offset, size, id;
};

// A copy runs when it is reported complete, at the second look after it was posted, not when
// posted: a caller that reads the destination, or reuses the source, before done() says so
// sees stale bytes, as it would on a GPU.
class StandinCopyQueue final : public CopyQueue {
 public:
  ~StandinCopyQueue() override { run_until(posted_); }  // as a stream's destructor waits for its work
  uint64_t copy(void* dst, const void* src, size_t bytes) override {
    pending_.push_back(Copy{dst, src, bytes});
    return ++posted_;
  }
  void drain() override { run_until(posted_); }
  uint64_t done() override {
    run_until(cut_);
    cut_ = posted_;  // complete from the next look on
    return done_;
  }

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  void run_until(uint64_t n) {
    for (; done_ < n; ++done_) {
      const Copy& c = pending_[done_ - first_];
      if (c.bytes > 0 && c.dst != c.src) std::memmove(c.dst, c.src, c.bytes);
    }
    if (done_ - first_ > 64) {
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done_ - first_));
      first_ = done_;
    }
  }
  std::vector<Copy> pending_;  // copies first_ + 1, first_ + 2, ... (first_ + i + 1 at [i])
  uint64_t first_ = 0, posted_ = 0, cut_ = 0, done_ = 0;
};

class StandinMemory final : public IpcMemory {
 public:
  StandinMemory() {
    void* p = ::mmap(nullptr, kArenaBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw Error(std::string("cuda_ipc stand-in: mmap of the arena: ") + std::strerror(errno));
    base_ = static_cast<char*>(p);
    free_[0] = kArenaBytes;
  }
  const char* name() const override { return "standin"; }

  AllocationRange allocation_of(const void* ptr) override {
    const char* p = static_cast<const char*>(ptr);
    std::lock_guard<std::mutex> lk(mu_);
    if (p >= base_ && p < base_ + kArenaBytes) {
      const uint64_t off = static_cast<uint64_t>(p - base_);
      auto it = used_.upper_bound(off);
      if (it != used_.begin()) {
        --it;
        if (off < it->first + it->second.size)
          return AllocationRange{reinterpret_cast<uintptr_t>(base_ + it->first), it->second.size, it->second.id, true};
      }
    }
    throw InvalidArgument("cuda_ipc: buffer " + std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                          " is not device memory allocated by this process (stand-in arena)");
  }
  std::string export_handle(uintptr_t base) override {
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t off = base - reinterpret_cast<uintptr_t>(base_);
    auto it = used_.find(off);
    if (it == used_.end()) throw Error("cuda_ipc stand-in: export of an address that starts no allocation");
    Handle h{off, it->second.size, it->second.id};
    return std::string(reinterpret_cast<const char*>(&h), sizeof h);
  }
  char* open_handle(const std::string& handle) override {
    Handle h{};
    if (handle.size() != sizeof h) throw Error("cuda_ipc stand-in: malformed memory handle");
    std::memcpy(&h, handle.data(), sizeof h);
    std::lock_guard<std::mutex> lk(mu_);
    auto it = used_.find(h.offset);
    if (it == used_.end() || it->second.id != h.id)
      throw Error("cuda_ipc stand-in: open of a memory handle whose allocation was freed (offset " +
                  std::to_string(h.offset) + ")");
    return base_ + h.offset;
  }
  void close_handle(char*) override {}
  std::unique_ptr<CopyQueue> copy_queue() override { return std::make_unique<StandinCopyQueue>(); }

  void* allocate(size_t bytes) override {
    const size_t n = ((bytes == 0 ? 1 : bytes) + kAlign - 1) / kAlign * kAlign;
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < n) continue;
      const uint64_t off = it->first, left = it->second - n;
      free_.erase(it);
      if (left > 0) free_[off + n] = left;
      used_[off] = Used{n, ++next_id_};
      return base_ + off;
    }
    throw Error("cuda_ipc stand-in: arena full (" + std::to_string(bytes) + " bytes asked)");
  }
  void release(void* ptr) override {
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t off = static_cast<uint64_t>(static_cast<char*>(ptr) - base_);
    auto it = used_.find(off);
    if (it == used_.end()) throw InvalidArgument("cuda_ipc stand-in: release of an address that starts no allocation");
    uint64_t start = off, size = it->second.size;
    used_.erase(it);
    // Give back the pages wholly inside the block (a neighbour may share its first and last
    // page: madvise rounds the length up to whole pages), so that freed memory costs nothing
    // and mostly reads as zeros again, which makes a read of freed memory show.
    const uint64_t page = 4096, first = (start + page - 1) / page * page, end = (start + size) / page * page;
    if (end > first) ::madvise(base_ + first, end - first, MADV_REMOVE);
    auto next = free_.find(start + size);
    if (next != free_.end()) {
      size += next->second;
      free_.erase(next);
    }
    auto prev = free_.lower_bound(start);
    if (prev != free_.begin()) {
      --prev;
      if (prev->first + prev->second == start) {
        start = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = size;
  }
  void to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }

 private:
  struct Used {
    uint64_t size, id;
  };
  std::mutex mu_;
  char* base_ = nullptr;
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes
  std::map<uint64_t, Used> used_;      // offset -> allocation
  uint64_t next_id_ = 0;
};

}  // namespace

IpcMemory& standin_memory() {
  static StandinMemory m;  // never unmapped: peers' mappings may outlive any one rank
  return m;
}

}  // namespace kolo::cuda_ipc

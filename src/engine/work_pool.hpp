// Recycles the memory of a group's Work objects (each with its shared_ptr control block, made
// by std::allocate_shared), so that issuing an operation allocates nothing once the group has
// a few Works in circulation.
//
// Blocks are taken only by the issuing thread under the group's issue lock (one consumer at a
// time) and given back by whichever thread drops a Work's last reference (many producers, a
// lock-free stack). The consumer takes the whole stack at once (one exchange) into a list of its
// own and pops from that without atomics: an issue costs an atomic operation only when its list
// runs dry, and no ABA can arise (nobody pops from the shared stack).
// Every Work's allocator holds the pool, so the pool lives until the last Work is gone.
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <new>

namespace kolo::engine {

class WorkPool {
 public:
  WorkPool() = default;
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  ~WorkPool() {
    for (Node* list : {head_.load(), mine_})
      for (Node* n = list; n != nullptr;) {
        Node* next = n->next;
        ::operator delete(n);
        n = next;
      }
  }

  void* take(size_t bytes) {
    // Only Works' control blocks come here, all of one size: the first request fixes it, and
    // stocks the pool, so that a Work still held for a moment by the engine thread (or by a
    // caller that keeps a few in flight) does not make the next issue allocate.
    if (block_bytes_ == 0 && bytes >= sizeof(Node)) {
      block_bytes_ = bytes;
      for (int i = 0; i < kInitialBlocks; ++i) give_back(::operator new(bytes), bytes);
    }
    if (bytes != block_bytes_) return ::operator new(bytes);  // not a Work block: not pooled
    if (mine_ == nullptr && head_.load(std::memory_order_relaxed) != nullptr)
      mine_ = head_.exchange(nullptr, std::memory_order_acquire);
    Node* h = mine_;
    if (h == nullptr) return ::operator new(bytes);
    mine_ = h->next;
    return h;
  }
  void give_back(void* p, size_t bytes) {
    if (bytes != block_bytes_) return ::operator delete(p);
    Node* n = static_cast<Node*>(p);
    n->next = head_.load(std::memory_order_relaxed);
    while (!head_.compare_exchange_weak(n->next, n, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }

 private:
  static constexpr int kInitialBlocks = 8;
  struct Node {
    Node* next;
  };
  std::atomic<Node*> head_{nullptr};  // given back, not yet taken over by the consumer
  Node* mine_ = nullptr;              // the consumer's own list (under the issue lock)
  size_t block_bytes_ = 0;  // written by the first take(); read after the Works it made exist
};

// The allocator std::allocate_shared uses: it rebinds it to its control block type.
template <class T>
struct WorkPoolAllocator {
  using value_type = T;
  explicit WorkPoolAllocator(std::shared_ptr<WorkPool> p) : pool(std::move(p)) {}
  template <class U>
  WorkPoolAllocator(const WorkPoolAllocator<U>& o) : pool(o.pool) {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(pool->take(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { pool->give_back(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const WorkPoolAllocator<U>& o) const { return pool == o.pool; }

  std::shared_ptr<WorkPool> pool;
};

}  // namespace kolo::engine

#include "engine/spare_works.hpp"

#include <mutex>
#include <new>
#include <vector>

namespace kolo::engine {

namespace {

// Room for libstdc++'s control block of a shared_ptr made with a deleter and an allocator
// (a vtable pointer, two counts, the empty deleter and the allocator's slot pointer: 24 bytes;
// allocate() checks it at compile time).
constexpr size_t kControlBlockBytes = 64;

}  // namespace

struct SpareWorks::Slot {
  alignas(Operation) unsigned char op_bytes[sizeof(Operation)];
  alignas(std::max_align_t) unsigned char control_block[kControlBlockBytes];
  bool built = false;  // op_bytes holds an Operation (the issuer's, or the sweeper's once orphaned)
  uint64_t handed = 0;  // shared_ptrs made so far (the issuer's)
  // Shared_ptrs whose last reference is gone: the last holder stores `handed` as it was when it
  // got the pointer, as the very last thing it does to the slot (release: whatever it did to the
  // Work happens before the next taker rewrites it).
  std::atomic<uint64_t> dropped{0};

  Operation* op() { return std::launder(reinterpret_cast<Operation*>(op_bytes)); }
  bool free() const { return dropped.load(std::memory_order_acquire) == handed; }
  void destroy_op() {
    if (built) op()->~Operation();
    built = false;
  }
};

namespace {

// The control block's deleter: the Work stays, for the next operation.
struct KeepWork {
  void operator()(Operation*) const noexcept {}
};

// Places the control block in the slot; its deallocation (the control block's last act, after
// the deleter) frees the slot.
template <class T>
struct SlotAllocator {
  using value_type = T;
  explicit SlotAllocator(SpareWorks::Slot* s) : slot(s) {}
  template <class U>
  SlotAllocator(const SlotAllocator<U>& o) : slot(o.slot) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    static_assert(sizeof(T) <= kControlBlockBytes && alignof(T) <= alignof(std::max_align_t),
                  "the control block does not fit its room in the slot");
    (void)n;  // always 1: std::shared_ptr allocates one control block
    return reinterpret_cast<T*>(slot->control_block);
  }
  void deallocate(T*, size_t) noexcept {
    slot->dropped.store(slot->handed, std::memory_order_release);
  }
  template <class U>
  bool operator==(const SlotAllocator<U>& o) const { return slot == o.slot; }

  SpareWorks::Slot* slot;
};

// Slots whose group is gone while their Work was still held.
struct Orphans {
  std::mutex mu;
  std::vector<SpareWorks::Slot*> slots;

  // Frees those whose holder has let go. Under mu.
  void sweep() {
    std::erase_if(slots, [](SpareWorks::Slot* s) {
      if (!s->free()) return false;
      s->destroy_op();
      delete s;
      return true;
    });
  }
};
// Never destroyed: a group may be destroyed after static destruction began, and the slots it
// leaves here stay reachable (no leak report) until their holders drop them.
Orphans& orphans_list() {
  static Orphans* o = new Orphans;
  return *o;
}

}  // namespace

SpareWorks::SpareWorks() {
  Orphans& o = orphans_list();
  std::lock_guard<std::mutex> lk(o.mu);
  o.sweep();
}

SpareWorks::~SpareWorks() {
  Orphans& o = orphans_list();
  std::lock_guard<std::mutex> lk(o.mu);
  // Freed now if nobody holds them, else once their holders let go.
  o.slots.insert(o.slots.end(), slots_.begin(), slots_.end());
  o.sweep();
}

size_t SpareWorks::orphans() {
  Orphans& o = orphans_list();
  std::lock_guard<std::mutex> lk(o.mu);
  o.sweep();
  return o.slots.size();
}

std::shared_ptr<Operation> SpareWorks::take(const char* op_name, uint64_t seq) {
  const size_t n = slots_.size();
  for (size_t i = 0; i < n && i < kProbe; ++i) {
    size_t k = last_ + i;
    if (k >= n) k -= n;
    if (slots_[k]->free()) {
      last_ = k;
      return hand_out(slots_[k], op_name, seq);
    }
  }
  if (n == kMaxSlots) return nullptr;
  slots_.push_back(new Slot);
  last_ = n;
  return hand_out(slots_[n], op_name, seq);
}

std::shared_ptr<Operation> SpareWorks::hand_out(Slot* s, const char* op_name, uint64_t seq) {
  if (s->built && WorkAccess::renewable(*s->op())) {
    // What issue() does not assign afresh, back to a new task's values (the engine's
    // reference is null already: its drop came before the slot was freed).
    Task& t = s->op()->task;
    t.skip_sends = 0;
    t.deferred = false;
    t.ticket = 0;
    t.fr = nullptr;
    if (t.var_counts) t.var_counts.reset();  // an alltoallv's: released with its Work's renewal
    WorkAccess::renew(*s->op(), op_name, seq);
  } else {
    // New, or it went through the queue (runner set), failed, or had a waiter or a callback:
    // built anew in place.
    s->destroy_op();
    WorkAccess::construct<Operation>(s->op_bytes, op_name, seq);
    s->built = true;
  }
  ++s->handed;
  return std::shared_ptr<Operation>(s->op(), KeepWork{}, SlotAllocator<Operation>(s));
}

}  // namespace kolo::engine

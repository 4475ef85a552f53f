// The Works a group hands out again and again to a synchronous caller, each held by that caller
// alone (docs/ARCHITECTURE.md, "The hot path").
//
// A caller that issues, waits and drops its Work before the next issue can get the same Work
// back, renewed in place: no allocation, no construction. The group used to keep a shared_ptr
// to it for that, so the caller's copy was a second reference: handing it out was an atomic
// increment, and the caller's drop an atomic decrement. Both are locked instructions, and the
// drop comes right after the collective's last message was published, where a locked
// instruction waits for the message's cache lines to leave this core (~100 ns, half a small
// collective here). A spare slot instead holds the Work and the memory of its shared_ptr control
// block; the group keeps no reference. The caller's shared_ptr is the only one (use count 1, weak
// count 1), and libstdc++ drops such a pointer with a load and plain stores; the control block's
// deleter leaves the Work alive and its deallocation marks the slot free with one store. The
// issuing thread (under the queue lock) sees that store, renews the Work and builds a new
// control block in the slot.
//
// A caller that keeps several operations in flight (torch's async_op, DDP's buckets, kolo-perf
// -z 0) holds several slots at once: the group makes slots as such a caller needs them, up to
// kMaxSlots (~420 bytes each), and looks for a free one from the slot it handed out last (free again for a
// synchronous caller; the next one on for a caller that issues a batch, then drops it), at most
// kProbe slots, so that a caller with more in flight than that costs a few loads per issue, and
// its operations beyond kMaxSlots come from the pool (process_group.cpp). Without this, such a
// caller's Works were built anew from the pool each time: ~450 instructions more per call than a
// synchronous caller's (construction, destruction, the pool's shared_ptr copied into each control
// block and dropped: two locked instructions), docs/PERFORMANCE.md.
//
// A slot still held when its group goes away moves to a process-wide list and is freed once its
// holder drops it (looked at whenever a group is made or destroyed): the holder's drop never has
// to learn that the group is gone, so it stays a single store.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/executor.hpp"

namespace kolo::engine {

class SpareWorks {
 public:
  SpareWorks();
  ~SpareWorks();
  SpareWorks(const SpareWorks&) = delete;
  SpareWorks& operator=(const SpareWorks&) = delete;

  // Under the group's queue lock: a Work for operation `seq` named `op_name` from a slot that
  // nobody holds (its old Work renewed, or a new one built in its place), or null when the
  // slots looked at are held and no more may be made.
  std::shared_ptr<Operation> take(const char* op_name, uint64_t seq);

  // Slots of destroyed groups not yet freed: their Works are still held (for tests).
  static size_t orphans();

  struct Slot;

 private:
  static constexpr size_t kMaxSlots = 1024;
  static constexpr size_t kProbe = 4;
  std::shared_ptr<Operation> hand_out(Slot* s, const char* op_name, uint64_t seq);
  std::vector<Slot*> slots_;  // made on demand (issuing thread, queue lock)
  size_t last_ = 0;           // the slot handed out last
};

}  // namespace kolo::engine

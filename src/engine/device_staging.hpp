// A group's resources for operations on device memory (docs/ARCHITECTURE.md, "Device
// memory"): the device it runs on, the stream its copies back to device memory run on, pinned
// host blocks the operations are staged in, events, and the flags streams wait on. Made at the
// group's first device operation; shared by its DeviceWorks, which give their block and events
// back when they end (reused once the GPU is done with them).
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "kernels/device_runtime.hpp"

namespace kolo::engine {

class DeviceStaging {
 public:
  DeviceStaging(kernels::DeviceRuntime& rt, int device, size_t keep_bytes);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  kernels::DeviceRuntime& rt;
  const int device;
  void* const copy_stream;  // the copies back; non-blocking (never waits for stream 0)

  struct Block {
    char* host = nullptr;
    size_t bytes = 0;
    bool in_slab = false;  // a slot of the slab: never freed on its own
  };
  // A pinned block of at least `bytes`, and two events, all free for use.
  Block take_block(size_t bytes);
  void* take_event();
  // A flag slot and the value it will be raised to for this operation.
  struct Flag {
    uint32_t* slot = nullptr;
    uint32_t value = 0;
    size_t index = 0;
  };
  Flag take_flag();
  // Gives back what an operation used: reused once `events` (two, either may be null) are done.
  void give_back(Block block, void* event_a, void* event_b, const Flag& flag);
  // Device memory of at least `bytes` for work queued on the copy stream from now on: where the
  // GPU reduces slices it then copies to the block, so that a reduction over P slices reads each
  // across the bus once and writes its result once (its passes read and write this, in the
  // GPU's memory). One at a time in stream order; a smaller one it replaces is kept until the
  // staging is destroyed (the stream may still use it).
  char* device_scratch(size_t bytes);

 private:
  struct Retired {
    Block block;
    void* events[2];
  };
  void reclaim_locked();  // moves retired blocks and events whose events are done to the free lists

  const size_t keep_bytes_;
  // Small operations' blocks are slots of one slab, and events are made ahead: pinning host
  // memory (cudaHostAlloc) costs hundreds of microseconds and synchronizes the device, and a
  // block or event still in the GPU's hands when the next operation comes cannot be reused.
  static constexpr size_t kSlotBytes = 64 << 10, kSlots = 64, kEventsAhead = 64;
  char* slab_ = nullptr;
  std::mutex mu_;
  std::vector<Block> free_blocks_;
  size_t free_bytes_ = 0;
  std::vector<void*> free_events_;
  std::vector<Retired> retired_;
  // Flags: pages of slots in pinned memory; each slot's last value; the free slots.
  static constexpr size_t kSlotsPerPage = 1024;
  std::vector<char*> scratch_;  // device memory; the last is the current one
  size_t scratch_bytes_ = 0;
  std::vector<uint32_t*> flag_pages_;
  std::vector<uint32_t> flag_values_;
  std::vector<size_t> free_flags_;
};

}  // namespace kolo::engine

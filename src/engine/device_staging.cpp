#include "engine/device_staging.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace kolo::engine {

DeviceStaging::DeviceStaging(kernels::DeviceRuntime& r, int d, size_t keep_bytes)
    : rt(r), device(d), copy_stream((r.set_device(d), r.create_stream())), keep_bytes_(keep_bytes) {
  slab_ = static_cast<char*>(rt.alloc_host(kSlotBytes * kSlots));
  for (size_t i = kSlots; i-- > 0;) free_blocks_.push_back({slab_ + i * kSlotBytes, kSlotBytes, true});
  for (size_t i = 0; i < kEventsAhead; ++i) free_events_.push_back(rt.create_event());
}

DeviceStaging::~DeviceStaging() {
  try {
    rt.set_device(device);
    // The copy stream may wait on a caller's stream that never gets there (a stuck kernel):
    // wait a bounded time, and past it leave everything allocated (the GPU may still write it)
    // rather than hang the group's destruction.
    void* drained = rt.create_event();
    rt.record(drained, copy_stream);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!rt.done(drained) && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (!rt.done(drained)) return;
    rt.destroy_event(drained);
    std::lock_guard<std::mutex> lk(mu_);
    reclaim_locked();
    for (Block& b : free_blocks_)
      if (!b.in_slab) rt.free_host(b.host);
    if (retired_.empty()) rt.free_host(slab_);  // else a stream may still copy into a slot
    for (void* e : free_events_) rt.destroy_event(e);
    // Blocks still retired are in a user's stream that has not reached them: left allocated.
    for (uint32_t* page : flag_pages_) rt.free_host(page);
    for (char* s : scratch_) rt.free_device(s);
    rt.destroy_stream(copy_stream);
  } catch (...) {
    // A broken CUDA context at exit: nothing more to free.
  }
}

char* DeviceStaging::device_scratch(size_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  if (scratch_.empty() || scratch_bytes_ < bytes) {
    scratch_bytes_ = std::max(bytes, scratch_bytes_ * 2);
    scratch_.push_back(static_cast<char*>(rt.alloc_device(scratch_bytes_)));
  }
  return scratch_.back();
}

void DeviceStaging::reclaim_locked() {
  auto done = [&](const Retired& r) {
    for (void* e : r.events)
      if (e && !rt.done(e)) return false;
    return true;
  };
  for (size_t i = 0; i < retired_.size();) {
    if (!done(retired_[i])) {
      ++i;
      continue;
    }
    Retired r = retired_[i];
    retired_[i] = retired_.back();
    retired_.pop_back();
    for (void* e : r.events)
      if (e) free_events_.push_back(e);
    if (r.block.host == nullptr) continue;
    if (r.block.in_slab) {
      free_blocks_.push_back(r.block);
    } else if (free_bytes_ + r.block.bytes <= keep_bytes_) {
      free_blocks_.push_back(r.block);
      free_bytes_ += r.block.bytes;
    } else {
      rt.free_host(r.block.host);
    }
  }
}

namespace {
// How long pinning `bytes` of host memory takes, roughly: cudaHostAlloc measured 41 ms for
// 64 MiB and 5 us for 64 KiB on an H200 host (kolo-bench-device-staging, docs/gpu-runs run 5),
// and it synchronizes the device besides. Waiting up to that long for a block in flight is
// never worse than pinning a new one.
std::chrono::microseconds pin_cost(size_t bytes) { return std::chrono::microseconds(1000 + (bytes >> 20) * 640); }
}  // namespace

DeviceStaging::Block DeviceStaging::take_block(size_t bytes) {
  if (bytes == 0) return {};
  // Back-to-back operations each take a block while the earlier ones' copies are still on the
  // GPU. A retired block that fits is waiting only for those copies: wait for it (reclaimed
  // into the free list once its events are done) rather than pin, for as long as pinning would
  // take. Without this, a loop of large operations pinned a block per call (H200 run 6:
  // 16 MiB all-reduces at 6.7 ms out of place against 0.45 ms in place).
  const auto give_up = std::chrono::steady_clock::now() + pin_cost(bytes);
  for (int polls = 0;; ++polls) {
    bool in_flight = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!retired_.empty()) reclaim_locked();
      // The smallest free block that holds it.
      size_t best = SIZE_MAX;
      for (size_t i = 0; i < free_blocks_.size(); ++i)
        if (free_blocks_[i].bytes >= bytes && (best == SIZE_MAX || free_blocks_[i].bytes < free_blocks_[best].bytes))
          best = i;
      if (best != SIZE_MAX) {
        Block b = free_blocks_[best];
        free_blocks_[best] = free_blocks_.back();
        free_blocks_.pop_back();
        if (!b.in_slab) free_bytes_ -= b.bytes;
        return b;
      }
      // Only a block the reclaim would keep can come back; past keep_bytes_ it is unpinned.
      for (const Retired& r : retired_)
        if (r.block.host != nullptr && r.block.bytes >= bytes &&
            (r.block.in_slab || free_bytes_ + r.block.bytes <= keep_bytes_))
          in_flight = true;
    }
    // Polled without the lock: the engine thread gives Works' flags and blocks back meanwhile.
    if (!in_flight || std::chrono::steady_clock::now() >= give_up) break;
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  // Powers of two from 64 KiB to 4 MiB, then multiples of 4 MiB: blocks fit later operations
  // of similar sizes without pinning twice what a large one needs.
  constexpr size_t kStep = 4 << 20;
  size_t size = kSlotBytes;
  while (size < bytes && size < kStep) size <<= 1;
  if (size < bytes) size = (bytes + kStep - 1) / kStep * kStep;
  return {static_cast<char*>(rt.alloc_host(size)), size, false};
}

void* DeviceStaging::take_event() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (free_events_.empty() && !retired_.empty()) reclaim_locked();
    if (!free_events_.empty()) {
      void* e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
  }
  return rt.create_event();
}

DeviceStaging::Flag DeviceStaging::take_flag() {
  std::lock_guard<std::mutex> lk(mu_);
  if (free_flags_.empty()) {
    auto* page = static_cast<uint32_t*>(rt.alloc_host(kSlotsPerPage * sizeof(uint32_t)));
    std::fill(page, page + kSlotsPerPage, 0u);
    const size_t first = flag_pages_.size() * kSlotsPerPage;
    flag_pages_.push_back(page);
    flag_values_.resize(first + kSlotsPerPage, 0);
    for (size_t i = kSlotsPerPage; i-- > 0;) free_flags_.push_back(first + i);
  }
  const size_t index = free_flags_.back();
  free_flags_.pop_back();
  // A slot's values only grow (its writes run in order on copy_stream, and it is taken again
  // only after its last operation queued its write), so a wait for an older value never sees a
  // newer operation's value as too small.
  return {flag_pages_[index / kSlotsPerPage] + index % kSlotsPerPage, ++flag_values_[index], index};
}

void DeviceStaging::give_back(Block block, void* event_a, void* event_b, const Flag& flag) {
  std::lock_guard<std::mutex> lk(mu_);
  if (flag.slot) free_flags_.push_back(flag.index);
  if (block.host || event_a || event_b) retired_.push_back({block, {event_a, event_b}});
}

}  // namespace kolo::engine

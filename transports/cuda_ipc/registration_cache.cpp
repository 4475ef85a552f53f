// RegistrationCache and PeerMappings (see registration_cache.hpp).
#include "transports/cuda_ipc/registration_cache.hpp"

#include <cstring>
#include "kolo/error.hpp"

namespace kolo::cuda_ipc {
namespace {

std::string mem_key(const std::string& prefix, int rank, uint64_t gen) {
  return prefix + "/mem/" + std::to_string(rank) + "/" + std::to_string(gen);
}

// What the store holds per registration: the allocation's size (8 bytes), then the handle.
Bytes published(uint64_t size, const std::string& handle) {
  Bytes v(sizeof size + handle.size());
  std::memcpy(v.data(), &size, sizeof size);
  std::memcpy(v.data() + sizeof size, handle.data(), handle.size());
  return v;
}

}  // namespace

RegistrationCache::RegistrationCache(Store& store, std::string prefix, int rank, IpcMemory& memory,
                                     std::function<void(uint64_t)> retired)
    : store_(store), prefix_(std::move(prefix)), rank_(rank), memory_(memory), retired_(std::move(retired)) {}

RegistrationCache::~RegistrationCache() = default;

RegistrationCache::Found RegistrationCache::lookup(const void* ptr, size_t bytes) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  // Fast path: a cached allocation covering the range. The driver is still asked for the
  // allocation's identity, because a freed and reallocated buffer can sit at the same base.
  const AllocationRange range = memory_.allocation_of(ptr);
  if (p + bytes > range.base + range.size) {
    throw InvalidArgument("cuda_ipc: buffer of " + std::to_string(bytes) + " bytes runs past the end of its allocation");
  }
  if (!range.exportable) return Found{0, 0};
  auto it = by_base_.find(range.base);
  if (it != by_base_.end()) {
    const AllocationRange& old = it->second.range;
    if (old.size == range.size && old.buffer_id == range.buffer_id) return Found{it->second.gen, p - range.base};
    retire(it->second);  // another allocation at the same address: the user freed the old one
    by_base_.erase(it);
  }
  // Cached ranges that overlap the new one are stale as well (the memory was reused).
  for (auto o = by_base_.begin(); o != by_base_.end();) {
    const AllocationRange& r = o->second.range;
    if (r.base < range.base + range.size && range.base < r.base + r.size) {
      retire(o->second);
      o = by_base_.erase(o);
    } else {
      ++o;
    }
  }
  const std::string handle = memory_.export_handle(range.base);
  const uint64_t gen = ++next_gen_;
  store_.set(mem_key(prefix_, rank_, gen), published(range.size, handle));
  by_base_.emplace(range.base, Entry{range, gen});
  ++exports_;
  return Found{gen, p - range.base};
}

bool RegistrationCache::deregister(const void* ptr) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  // By address, not through the driver: the caller may be about to free, or have freed, it.
  auto it = by_base_.upper_bound(p);
  if (it == by_base_.begin()) return false;
  --it;
  if (p >= it->second.range.base + it->second.range.size) return false;
  retire(it->second);
  by_base_.erase(it);
  return true;
}

void RegistrationCache::clear() {
  for (auto& [base, e] : by_base_) retire(e);
  by_base_.clear();
}

void RegistrationCache::retire(const Entry& e) {
  if (retired_) retired_(e.gen);
  // Peers read the key when a call first names the generation, which is before that call
  // returns here; a retired generation is never named again, so the key can go.
  store_.delete_key(mem_key(prefix_, rank_, e.gen));
}

PeerMappings::PeerMappings(Store& store, std::string prefix, IpcMemory& memory)
    : store_(store), prefix_(std::move(prefix)), memory_(memory) {}

PeerMappings::~PeerMappings() {
  try {
    close_all();
  } catch (...) {
    // Closing at exit: the driver reclaims the mappings with the context anyway.
  }
}

char* PeerMappings::get(int peer, uint64_t gen) {
  auto it = by_gen_.find({peer, gen});
  if (it != by_gen_.end()) return it->second.base;
  const Bytes value = store_.get(mem_key(prefix_, peer, gen));
  if (value.size() <= sizeof(uint64_t)) throw Error("cuda_ipc: malformed registration from rank " + std::to_string(peer));
  std::string handle(reinterpret_cast<const char*>(value.data()) + sizeof(uint64_t), value.size() - sizeof(uint64_t));
  auto opened = by_handle_.find(handle);
  if (opened == by_handle_.end()) {
    char* base = memory_.open_handle(handle);
    opened = by_handle_.emplace(handle, Opened{base, 0}).first;
  }
  ++opened->second.refs;
  by_gen_.emplace(std::make_pair(peer, gen), Mapping{handle, opened->second.base});
  return opened->second.base;
}

void PeerMappings::release(const std::string& handle) {
  auto it = by_handle_.find(handle);
  if (it == by_handle_.end() || --it->second.refs > 0) return;
  char* base = it->second.base;
  by_handle_.erase(it);
  memory_.close_handle(base);
}

void PeerMappings::close(int peer, uint64_t gen) {
  auto it = by_gen_.find({peer, gen});
  if (it == by_gen_.end()) return;
  const std::string handle = it->second.handle;
  by_gen_.erase(it);
  release(handle);
}

void PeerMappings::close_peer(int peer) {
  for (auto it = by_gen_.begin(); it != by_gen_.end();) {
    if (it->first.first != peer) {
      ++it;
      continue;
    }
    const std::string handle = it->second.handle;
    it = by_gen_.erase(it);
    release(handle);
  }
}

void PeerMappings::close_all() {
  while (!by_gen_.empty()) close_peer(by_gen_.begin()->first.first);
}

}  // namespace kolo::cuda_ipc

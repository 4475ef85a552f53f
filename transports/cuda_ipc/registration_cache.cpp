// RegistrationCache and PeerMappings (see registration_cache.hpp).
#include "transports/cuda_ipc/registration_cache.hpp"

#include <cuda.h>  // types of the driver call only: it is reached through cudart, not linked

#include <cstring>
#include "kolo/error.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace kolo::cuda_ipc {
namespace {

// cuPointerGetAttributes through cudart's entry-point query, so that nothing here links
// libcuda (whose stub is all a build machine without a GPU has).
using PointerGetAttributes = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);

PointerGetAttributes pointer_get_attributes() {
  static PointerGetAttributes fn = [] {
    // The symbol's ABI has not changed since CUDA 7; ask as of this runtime, then as of 12.0.
    for (unsigned version : {unsigned{CUDART_VERSION}, 12000u}) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult found{};
      const cudaError_t rc = cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &p, version, cudaEnableDefault, &found);
      if (rc == cudaSuccess && found == cudaDriverEntryPointSuccess && p != nullptr) {
        return reinterpret_cast<PointerGetAttributes>(p);
      }
      (void)cudaGetLastError();
    }
    throw Error("cuda_ipc: cudaGetDriverEntryPointByVersion found no cuPointerGetAttributes in the driver");
  }();
  return fn;
}

std::string mem_key(const std::string& prefix, int rank, uint64_t gen) {
  return prefix + "/mem/" + std::to_string(rank) + "/" + std::to_string(gen);
}

// What the store holds per registration: the handle, then the allocation's size.
struct Published {
  cudaIpcMemHandle_t handle;
  uint64_t size;
};

}  // namespace

AllocationRange allocation_of(const void* ptr) {
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE,     CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED,     CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
  unsigned memory_type = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  unsigned long long id = 0;
  unsigned managed = 0;  // bool-valued attributes are written as an int-sized value
  unsigned ipc_capable = 0;
  void* data[] = {&memory_type, &start, &size, &id, &managed, &ipc_capable};
  const CUresult rc = pointer_get_attributes()(6, attrs, data, reinterpret_cast<CUdeviceptr>(ptr));
  // Managed memory reads as host or device memory depending on where its pages are; it is
  // the caller's GPU memory either way (the bounce path moves it).
  if (rc != CUDA_SUCCESS || (memory_type != CU_MEMORYTYPE_DEVICE && !managed) || start == 0) {
    throw InvalidArgument("cuda_ipc: buffer " + std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                          " is not device memory allocated by this process (CUresult " + std::to_string(rc) + ")");
  }
  return AllocationRange{static_cast<uintptr_t>(start), size, id, ipc_capable != 0 && managed == 0};
}

RegistrationCache::RegistrationCache(Store& store, std::string prefix, int rank, HostFlags& flags)
    : store_(store), prefix_(std::move(prefix)), rank_(rank), flags_(flags) {}

RegistrationCache::~RegistrationCache() = default;

RegistrationCache::Found RegistrationCache::lookup(const void* ptr, size_t bytes) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  // Fast path: a cached allocation covering the range. The driver is still asked for the
  // allocation's identity, because a freed and reallocated buffer can sit at the same base.
  const AllocationRange range = allocation_of(ptr);
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
  Published pub{};
  check(cudaIpcGetMemHandle(&pub.handle, reinterpret_cast<void*>(range.base)), "cudaIpcGetMemHandle");
  pub.size = range.size;
  const uint64_t gen = ++next_gen_;
  const auto* raw = reinterpret_cast<const uint8_t*>(&pub);
  store_.set(mem_key(prefix_, rank_, gen), Bytes(raw, raw + sizeof(pub)));
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
  flags_.retire(e.gen);
  // Peers read the key when a call first names the generation, which is before that call
  // returns here; a retired generation is never named again, so the key can go.
  store_.delete_key(mem_key(prefix_, rank_, e.gen));
}

PeerMappings::PeerMappings(Store& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}

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
  if (value.size() != sizeof(Published)) throw Error("cuda_ipc: malformed registration from rank " + std::to_string(peer));
  Published pub;
  std::memcpy(&pub, value.data(), sizeof(pub));
  std::string handle(reinterpret_cast<const char*>(&pub.handle), sizeof(pub.handle));
  auto opened = by_handle_.find(handle);
  if (opened == by_handle_.end()) {
    void* base = nullptr;
    check(cudaIpcOpenMemHandle(&base, pub.handle, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
    opened = by_handle_.emplace(handle, Opened{static_cast<char*>(base), 0}).first;
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
  check(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle");
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

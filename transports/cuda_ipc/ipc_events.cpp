// IpcEvents (see ipc_events.hpp).
#include "transports/cuda_ipc/ipc_events.hpp"

#include <algorithm>
#include <cstring>
#include <vector>
#include "transports/cuda_ipc/cuda_check.hpp"

namespace kolo::cuda_ipc {
namespace {
std::string event_key(const std::string& prefix, int rank, int phase) {
  return prefix + "/event/" + std::to_string(rank) + "/" + std::to_string(phase);
}
// The ring's step phases exist only up to its 2 (P - 1) - 1 for this world, and a rank waits
// only for its left neighbour's: each process opens 2 P - 3 of them, not (P - 1) (2 P - 3).
int event_phases(int world) { return kRingStep0 + std::max(0, 2 * (world - 1) - 1); }
bool opens(int rank, int world, int peer, int phase) {
  return phase < kRingStep0 || peer == (rank + world - 1) % world;
}
}  // namespace

IpcEvents::IpcEvents(Store& store, const std::string& prefix, int rank, int world, std::chrono::milliseconds timeout)
    : rank_(rank), world_(world) {
  try {
    for (int ph = 0; ph < event_phases(world); ++ph) {
      check(cudaEventCreateWithFlags(&events_[rank][ph], cudaEventInterprocess | cudaEventDisableTiming),
            "cudaEventCreateWithFlags(interprocess)");
      cudaIpcEventHandle_t h;
      check(cudaIpcGetEventHandle(&h, events_[rank][ph]), "cudaIpcGetEventHandle");
      const auto* raw = reinterpret_cast<const uint8_t*>(&h);
      store.set(event_key(prefix, rank, ph), Bytes(raw, raw + sizeof(h)));
    }
    std::vector<std::string> keys;
    for (int p = 0; p < world; ++p)
      for (int ph = 0; ph < event_phases(world); ++ph)
        if (p == rank || opens(rank, world, p, ph)) keys.push_back(event_key(prefix, p, ph));
    store.wait(keys, timeout);
    for (int p = 0; p < world; ++p) {
      if (p == rank) continue;
      for (int ph = 0; ph < event_phases(world); ++ph) {
        if (!opens(rank, world, p, ph)) continue;
        const Bytes b = store.get(event_key(prefix, p, ph));
        cudaIpcEventHandle_t h;
        if (b.size() != sizeof(h)) throw Error("cuda_ipc: malformed event handle from rank " + std::to_string(p));
        std::memcpy(&h, b.data(), sizeof(h));
        check(cudaIpcOpenEventHandle(&events_[p][ph], h), "cudaIpcOpenEventHandle");
      }
    }
  } catch (...) {
    destroy();
    throw;
  }
}

IpcEvents::~IpcEvents() { destroy(); }

void IpcEvents::destroy() {
  for (int p = 0; p < world_; ++p)
    for (int ph = 0; ph < kNumEventPhases; ++ph)
      if (events_[p][ph] != nullptr) {
        (void)cudaEventDestroy(events_[p][ph]);
        events_[p][ph] = nullptr;
      }
}

void IpcEvents::record(Phase phase, cudaStream_t stream) {
  check(cudaEventRecord(events_[rank_][phase], stream), "cudaEventRecord(ipc event)");
}

void IpcEvents::wait(int peer, Phase phase, cudaStream_t stream) {
  check(cudaStreamWaitEvent(stream, events_[peer][phase], 0), "cudaStreamWaitEvent(peer's ipc event)");
}

}  // namespace kolo::cuda_ipc

// Per-collective options, modelled on c10d's *Options structs.
// A zero timeout means "the group's default" (KOLO_TIMEOUT, 300 s unless set).
// An empty algorithm means "choose automatically"; otherwise it names a registered algorithm
// ("ring", "tree", "direct", ...) and overrides KOLO_ALGO for this call.
#pragma once
#include <chrono>
#include <string>
#include "kolo/types.hpp"

namespace kolo {

using Milliseconds = std::chrono::milliseconds;

struct CommonOptions {
  Milliseconds timeout{0};
  std::string algorithm;
  // Start the operation on the group's engine thread at once. By default a caller that keeps
  // waiting right after issuing has its collectives run on its own thread inside wait() (no
  // thread hand-off); set this for operations meant to overlap with computation (DDP buckets).
  bool overlap = false;
  // For device (CUDA) buffers: the cudaStream_t, cast to void*, the operation is ordered on. It
  // starts once the work queued on this stream before the call has run, and Work::wait() makes
  // this stream wait for its result (without blocking the host). nullptr: the legacy default
  // stream. Ignored for host buffers. A device operation always runs on the engine thread.
  void* stream = nullptr;
};

struct BroadcastOptions : CommonOptions { int root = 0; };
struct AllreduceOptions : CommonOptions { ReduceOp op = ReduceKind::sum; };
struct ReduceOptions : CommonOptions { ReduceOp op = ReduceKind::sum; int root = 0; };
struct AllgatherOptions : CommonOptions {};
struct GatherOptions : CommonOptions { int root = 0; };
struct ScatterOptions : CommonOptions { int root = 0; };
struct ReduceScatterOptions : CommonOptions { ReduceOp op = ReduceKind::sum; };
struct AllToAllOptions : CommonOptions {};
struct BarrierOptions : CommonOptions {};
// Point-to-point: a send matches the receive the peer posted in the same order; both must name
// the same tag, or the receive fails with a MismatchError. A receive from any source
// (kAnySource) takes the first sender's next message that carries its tag.
struct SendOptions : CommonOptions { uint32_t tag = 0; };
struct RecvOptions : CommonOptions { uint32_t tag = 0; };

}  // namespace kolo

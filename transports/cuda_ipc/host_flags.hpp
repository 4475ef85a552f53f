// The host half of the cross-process handshake: a small POSIX shared-memory segment that the
// ranks of one node map, holding per rank a sequence number per phase, the descriptor of its
// current call and a ring of retired registrations.
//
// Why it exists: an IPC event alone cannot order two processes. cudaStreamWaitEvent waits for
// the event's most recent cudaEventRecord *at the time of the wait call*; if the peer has not
// yet recorded call k, a wait issued now would wait on call k-1 and the kernel would read a
// buffer that is not ready. So a rank first learns here (on the CPU, through shared memory, in
// well under a microsecond once the peer got there) that the peer's record for call k was
// issued, and only then enqueues the wait. Nothing on the GPU ever spins on these flags.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include "kolo/store.hpp"
#include "transports/cuda_ipc/limits.hpp"

namespace kolo::cuda_ipc {

// The phases of one call that peers wait for, each with its own IPC event (ipc_events.hpp),
// plus kBye, the last handshake before the events are destroyed. The ring all-reduce has
// 2 (P - 1) steps and a phase after each but the last (kRingStep0 + g: "my step g is done"),
// which only its right neighbour waits for; one phase per step, like two-shot's kMid, so that
// each has its own event and the "latest record" argument of ipc_comm.cpp holds for each.
constexpr int kMaxRingSteps = 2 * (kMaxRanks - 1) - 1;  // phases between the ring's steps
enum Phase : int {
  kReady = 0,
  kMid = 1,
  kDone = 2,
  kRingStep0 = 3,
  kBye = kRingStep0 + kMaxRingSteps,
  kNumPhases
};
constexpr int kNumEventPhases = kBye;  // kReady, kMid, kDone and the ring's steps
inline Phase ring_step_phase(int g) { return static_cast<Phase>(kRingStep0 + g); }
constexpr int kRetireRing = 256;

// What a rank says about its current call: which registrations (generation numbers, see
// registration_cache.hpp) and offsets its input and output are at, and the call's shape, which
// every peer checks against its own so that mismatched calls fail instead of reading garbage.
// Generation 0: the buffer is not shared in this call (a broadcast's non-root buffer).
struct CallDesc {
  uint64_t gen_in = 0, off_in = 0, gen_out = 0, off_out = 0;
  uint64_t count = 0;
  uint32_t dtype = 0, algo = 0;
  uint32_t kind = 0;  // the collective (ipc_comm.hpp, Collective)
  int32_t root = 0;   // broadcast's and reduce's
};

class HostFlags {
 public:
  // Collective: rank 0 creates the segment and publishes its name under "<prefix>/shm"; the
  // others open it; rank 0 unlinks the name once all have mapped it (nothing left in /dev/shm).
  HostFlags(Store& store, const std::string& prefix, int rank, int world, std::chrono::milliseconds timeout);
  ~HostFlags();
  HostFlags(const HostFlags&) = delete;
  HostFlags& operator=(const HostFlags&) = delete;

  // This rank reached `phase` of call `seq` (its event record for it is issued).
  void publish(Phase phase, uint64_t seq);
  // Until `peer` published `phase` with a number >= seq; throws TimeoutError after the timeout,
  // or Error as soon as waiting is pointless: the peer marked itself failed (mark_failed), its
  // process is gone, or the stop check (set_stop_check) gives a reason.
  void wait(int peer, Phase phase, uint64_t seq) const;
  // This rank will not go on (its call failed before it published): peers waiting for it stop
  // at once instead of at their timeout. The engine's group learns of a failure only through
  // its host transports, which may be idle while the ranks meet here.
  void mark_failed();
  // Looked at every ~1,000 yields of a wait: a non-empty answer ends it (the engine's group
  // failed: a peer died or aborted, and would never publish).
  void set_stop_check(std::function<std::string()> check) { stop_check_ = std::move(check); }

  // The word of `rank`'s `phase` (one with an event: kReady, kMid, kDone, the ring's steps)
  // that GPU streams write and wait on in the flag-ordered mode (gpu_flags.hpp), apart from
  // the host's counters: a stream writes it when it gets there, the host publishes when the
  // call is issued.
  uint64_t* gpu_word(int rank, Phase phase);
  // The whole segment, for registering it with CUDA (gpu_flags.hpp).
  void* segment() const { return seg_; }
  size_t segment_bytes() const { return bytes_; }

  CallDesc& my_desc();
  const CallDesc& desc(int peer) const;

  // This rank's registration `gen` is gone: peers close their mappings of it.
  void retire(uint64_t gen);
  uint64_t retired_count(int peer) const;
  uint64_t retired_at(int peer, uint64_t index) const;

 private:
  struct Segment;
  Segment* seg_ = nullptr;
  size_t bytes_ = 0;
  int rank_, world_;
  std::chrono::milliseconds timeout_;
  std::function<std::string()> stop_check_;
  uint64_t pid_namespace_ = 0;  // this process's (0: unknown); peers' pids are checked only in the same one
  // Empty while `peer` may still come: it did not mark itself failed and its process lives.
  std::string why_peer_is_gone(int peer) const;
};

}  // namespace kolo::cuda_ipc

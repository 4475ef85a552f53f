// HostFlags: the shared-memory segment of the handshake (see host_flags.hpp).
#include "transports/cuda_ipc/host_flags.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <vector>
#include "kolo/error.hpp"
#include "transports/cuda_ipc/limits.hpp"

namespace kolo::cuda_ipc {

// Cross-process atomics must be address-free: lock-free 64-bit ones are on x86-64 and aarch64.
static_assert(std::atomic<uint64_t>::is_always_lock_free);

namespace {
// One cache line per counter: a rank writing its counter does not evict the line peers poll.
struct alignas(64) Counter {
  std::atomic<uint64_t> value{0};
};
struct alignas(64) RankArea {
  Counter phase[kNumPhases];
  CallDesc desc;
  Counter retired_count;
  uint64_t retired[kRetireRing];
  // Written once when the rank maps the segment: whose process it is, so that a waiting peer
  // can tell a rank that died (SIGKILL, a crash) from a slow one. Pids compare only within one
  // pid namespace (the inode of /proc/self/ns/pid).
  std::atomic<int64_t> pid{0};
  std::atomic<uint64_t> pid_namespace{0};
  Counter failed;  // 1: the rank's call failed and it will not publish again (mark_failed)
  Counter gpu[kNumEventPhases];  // written by the rank's stream (gpu_word)
};

uint64_t own_pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}
}  // namespace

struct HostFlags::Segment {
  RankArea rank[kMaxRanks];
};

namespace {
std::string errno_text(const char* what) { return std::string("cuda_ipc: ") + what + ": " + std::strerror(errno); }
}  // namespace

HostFlags::HostFlags(Store& store, const std::string& prefix, int rank, int world, std::chrono::milliseconds timeout)
    : rank_(rank), world_(world), timeout_(timeout) {
  if (world < 1 || world > kMaxRanks || rank < 0 || rank >= world) {
    throw InvalidArgument("cuda_ipc: rank " + std::to_string(rank) + " of " + std::to_string(world) + " (at most " +
                          std::to_string(kMaxRanks) + " ranks)");
  }
  bytes_ = sizeof(Segment);
  const std::string name_key = prefix + "/shm";
  std::string name;
  int fd = -1;
  if (rank == 0) {
    std::random_device rd;
    name = "/kolo-ipc-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) throw Error(errno_text("shm_open (create)"));
    if (::ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
      ::close(fd);
      ::shm_unlink(name.c_str());
      throw Error(errno_text("ftruncate"));
    }
  } else {
    name = store.get_string(name_key);
    fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) throw Error(errno_text("shm_open (open)"));
  }
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    if (rank == 0) ::shm_unlink(name.c_str());
    throw Error(errno_text("mmap"));
  }
  // A fresh segment reads as zeros, which is every counter's start; construct in place anyway.
  if (rank == 0) new (p) Segment();
  seg_ = static_cast<Segment*>(p);
  pid_namespace_ = own_pid_namespace();
  seg_->rank[rank].pid_namespace.store(pid_namespace_, std::memory_order_relaxed);
  seg_->rank[rank].pid.store(::getpid(), std::memory_order_release);
  if (rank == 0) store.set(name_key, name);
  store.set(prefix + "/shm_mapped/" + std::to_string(rank), std::string("1"));
  if (rank == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < world; ++r) keys.push_back(prefix + "/shm_mapped/" + std::to_string(r));
    store.wait(keys, timeout);
    ::shm_unlink(name.c_str());
  }
}

HostFlags::~HostFlags() {
  if (seg_ != nullptr) ::munmap(seg_, bytes_);
}

void HostFlags::publish(Phase phase, uint64_t seq) {
  seg_->rank[rank_].phase[phase].value.store(seq, std::memory_order_release);
}

void HostFlags::mark_failed() { seg_->rank[rank_].failed.value.store(1, std::memory_order_release); }

std::string HostFlags::why_peer_is_gone(int peer) const {
  const RankArea& area = seg_->rank[peer];
  if (area.failed.value.load(std::memory_order_acquire) != 0) return "its call failed";
  const int64_t pid = area.pid.load(std::memory_order_acquire);
  // kill(pid, 0) sends nothing; ESRCH: no such process (EPERM: alive, another user's).
  if (pid > 0 && pid_namespace_ != 0 && area.pid_namespace.load(std::memory_order_relaxed) == pid_namespace_ &&
      ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    return "its process " + std::to_string(pid) + " exited";
  }
  return {};
}

void HostFlags::wait(int peer, Phase phase, uint64_t seq) const {
  const auto& v = seg_->rank[peer].phase[phase].value;
  if (v.load(std::memory_order_acquire) >= seq) return;
  // Spin briefly (the peer is usually microseconds away), then yield the core: ranks can
  // outnumber cores, and the peer may need this one to get here.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (uint64_t spins = 0;; ++spins) {
    if (v.load(std::memory_order_acquire) >= seq) return;
    if (spins < 4096) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else {
      ::sched_yield();
      if ((spins & 1023) == 0) {
        if (std::string why = why_peer_is_gone(peer); !why.empty()) {
          throw PeerError("cuda_ipc: rank " + std::to_string(rank_) + " stopped waiting for rank " +
                              std::to_string(peer) + " to reach phase " + std::to_string(phase) + " of call " +
                              std::to_string(seq) + ": rank " + std::to_string(peer) + " failed (" + why + ")",
                          peer);
        }
      }
      if ((spins & 1023) == 0 && stop_check_) {
        if (std::string why = stop_check_(); !why.empty()) {
          throw Error("cuda_ipc: rank " + std::to_string(rank_) + " stopped waiting for rank " + std::to_string(peer) +
                      " to reach phase " + std::to_string(phase) + " of call " + std::to_string(seq) + ": " + why);
        }
      }
      if ((spins & 1023) == 0 && std::chrono::steady_clock::now() > deadline) {
        throw TimeoutError("cuda_ipc: rank " + std::to_string(rank_) + " waited " + std::to_string(timeout_.count()) +
                           " ms for rank " + std::to_string(peer) + " to reach phase " + std::to_string(phase) +
                           " of call " + std::to_string(seq) + " (it is at " +
                           std::to_string(v.load(std::memory_order_relaxed)) + ")",
                           peer);
      }
    }
  }
}

uint64_t* HostFlags::gpu_word(int rank, Phase phase) {
  // The atomic's object representation is the plain 64-bit word the GPU writes.
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
  return reinterpret_cast<uint64_t*>(&seg_->rank[rank].gpu[phase].value);
}

CallDesc& HostFlags::my_desc() { return seg_->rank[rank_].desc; }
const CallDesc& HostFlags::desc(int peer) const { return seg_->rank[peer].desc; }

void HostFlags::retire(uint64_t gen) {
  auto& area = seg_->rank[rank_];
  const uint64_t n = area.retired_count.value.load(std::memory_order_relaxed);
  area.retired[n % kRetireRing] = gen;
  area.retired_count.value.store(n + 1, std::memory_order_release);
}

uint64_t HostFlags::retired_count(int peer) const {
  return seg_->rank[peer].retired_count.value.load(std::memory_order_acquire);
}

uint64_t HostFlags::retired_at(int peer, uint64_t index) const { return seg_->rank[peer].retired[index % kRetireRing]; }

}  // namespace kolo::cuda_ipc

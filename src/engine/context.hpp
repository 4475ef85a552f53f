// The group's view of its transports: which device carries each peer's messages, progress over
// all devices, and the first peer failure (the group's error from then on).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/common/fd.hpp"
#include "transports/transport.hpp"

namespace kolo::engine {

// What kind of error the group's first failure was, so that every rank raises the same type.
enum class ErrorKind : char { peer = 'P', timeout = 'T', mismatch = 'M' };

struct PeerFailure {
  int peer = -1;            // the rank that caused it (for an abort notice: the rank it blames)
  transport::Failure why = transport::Failure::none;
  ErrorKind kind = ErrorKind::peer;
  std::string detail;
};

class Context final : public transport::FailureSink {
 public:
  Context(int rank, int size);
  ~Context() override;

  int rank() const { return rank_; }
  int size() const { return size_; }

  void add_device(std::unique_ptr<transport::Device> dev, const std::vector<int>& peers);
  // Inline for the devices whose pairs never change (every collective looks a pair up per message).
  transport::Pair& pair(int peer) const {
    const auto i = static_cast<size_t>(peer);  // a negative peer wraps: pair_of_device refuses it
    if (i < fixed_pairs_.size() && fixed_pairs_[i] != nullptr) return *fixed_pairs_[i];
    return pair_of_device(peer);
  }
  const char* transport_name(int peer) const;
  // The connection to `peer` went to another group (Device::hand_over, a shrink's successor):
  // this context must not reach it any more; a late look-up fails instead.
  void forget_pair(int peer);
  // The device that carries `peer`'s messages (null: none), for a hand-over of its connection.
  transport::Device* device_of(int peer) const {
    return peer >= 0 && static_cast<size_t>(peer) < by_peer_.size() ? by_peer_[static_cast<size_t>(peer)] : nullptr;
  }
  // Every peer is reached by a device whose pairs move small messages at once (send_now,
  // recv_now): the direct path may be tried. False with no peers.
  bool all_peers_move_now() const;

  // Non-blocking: moves what can move on every device; true if anything changed.
  bool poll();
  // Sleeps until a device may have work, wake() is called, or `max_wait` passes. With a `key`
  // from wake_key(), also returns at once if wake_sleeper() was called since the key was taken
  // (an event count: take the key, look for work, then block with it, and no wake-up is lost).
  static constexpr uint64_t kNoKey = UINT64_MAX;
  void block(std::chrono::microseconds max_wait, uint64_t key = kNoKey);
  uint64_t wake_key() const { return wake_epoch_.load(std::memory_order_seq_cst); }
  // Thread-safe: interrupts block().
  void wake();
  // Thread-safe: counts a wake-up for block()'s key, and pays for the system call that
  // interrupts a sleep only when a thread is in block(). Queueing an operation for a busy
  // engine thread wrote the wake-up descriptor every time: a system call per overlapped
  // collective.
  void wake_sleeper() {
    wake_epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (blocked_.load(std::memory_order_seq_cst) > 0) wake();
  }

  // FailureSink: records the first failure; waits check has_failure().
  void peer_failed(int peer, transport::Failure why, const std::string& detail) override;
  bool has_failure() const { return failed_.load(std::memory_order_acquire); }
  PeerFailure failure() const;

  // Tells every peer and fails every pending request; idempotent.
  void abort(const std::string& reason);
  // Orderly goodbye on every device; returns peers that did not answer in time.
  std::vector<int> close(std::chrono::steady_clock::time_point deadline);

  // The names of the groups that run on these connections, by the id their tags carry
  // (tags.hpp; 0 is the owner), so that a mismatch between two of them names both. Thread-safe;
  // read only when a mismatch is reported.
  void name_group(uint16_t id, const std::string& name);
  std::string group_name(uint16_t id) const;

 private:
  int rank_, size_;
  std::vector<std::unique_ptr<transport::Device>> devices_;
  std::vector<transport::Device*> by_peer_;
  std::vector<transport::Pair*> fixed_pairs_;  // per peer, where its device's pairs_fixed()
  transport::Pair& pair_of_device(int peer) const;
  transport::Fd wake_fd_;
  std::atomic<uint64_t> wake_epoch_{0};  // wake_sleeper() calls
  std::atomic<int> blocked_{0};          // threads in block()
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  PeerFailure failure_;
  bool aborted_ = false;
  mutable std::mutex names_mu_;
  std::map<uint16_t, std::string> group_names_;
};

// Abort notices carry the rank to blame and the kind of error first, so that a rank that learns
// of a failure second hand still names the original culprit and raises the same exception type:
// "<rank>\n<kind>\n<message>".
std::string encode_abort_reason(int culprit, ErrorKind kind, const std::string& message);
void decode_abort_reason(const std::string& reason, int* culprit, ErrorKind* kind, std::string* message);

}  // namespace kolo::engine

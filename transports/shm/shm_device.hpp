// The shared-memory transport's device: this rank's segment (one inbound ring per local peer),
// the peers' segments it writes into, one control socket per peer, and the sleep/wake protocol.
//
// Sleeping: the engine polls, spins a while, then sleeps in poll(2) on wait_fd(), an epoll set
// over the control sockets and a "nudge" eventfd. While the device is awake the nudge is kept
// readable, so a sleep attempt that skipped prepare_sleep() returns at once. Just before the
// engine sleeps, prepare_sleep() *arms* the device: each pair sets the shared-memory flags for
// what it waits for (a slot from the peer, a free slot or a finished large read), the rings and
// sockets are checked once more, and the nudge is drained. From then on the peer, when it
// publishes or frees something and sees the flag, writes one doorbell byte on the socket, which
// wakes us. The next poll() (or a new request) disarms again. So busy ranks exchange messages
// with no system call and no clock read, and idle ones sleep.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "transports/shm/shm_pair.hpp"
#include "transports/shm/shm_segment.hpp"
#include "transports/transport.hpp"

namespace kolo::shm {

class ShmDevice final : public transport::Device {
 public:
  static std::unique_ptr<transport::Device> connect(const transport::Bootstrap& b, const std::vector<int>& peers);
  // Whether rank `peer` shares this rank's host (same host identity in the bootstrap).
  static bool reaches(const transport::Bootstrap& b, int peer);
  // A device over one pair whose rings and socket are already set up: lets the ring tests and
  // the ring fuzzer (tests/fuzz/fuzz_shm_ring.cpp) play a peer writing slots, with no store,
  // handshake or segment.
  static std::unique_ptr<ShmDevice> adopt(int size, transport::FailureSink* sink, PairSetup s);
  ~ShmDevice() override;

  const char* name() const override { return "shm"; }
  transport::Pair* pair(int peer) override;
  bool poll() override;
  int wait_fd() const override { return epfd_.get(); }
  bool prepare_sleep() override;
  bool moves_now() const override { return true; }
  bool pairs_fixed() const override { return true; }
  void abort(const std::string& reason) override;
  std::vector<int> reusable_peers() const override;
  std::unique_ptr<transport::Device> hand_over(const Handover& h) override;
  std::vector<int> close(std::chrono::steady_clock::time_point deadline) override;

  // For pairs.
  void note_post() {
    if (armed_) disarm();
  }
  void forget_socket(int fd);

 private:
  // The setup itself, into `dev`; adds every peer segment name it learns to `peer_names`, which
  // connect() unlinks should the setup fail (after telling the peers why, so that a peer finding
  // a name gone can report the cause rather than the missing name).
  static void connect_or_throw(const transport::Bootstrap& b, const std::vector<int>& peers, ShmDevice* dev,
                               std::vector<std::string>* peer_names);
  ShmDevice(int size, transport::FailureSink* sink);
  void add_pair(PairSetup s);  // makes the pair and watches its control socket
  void adopt_pair(std::unique_ptr<ShmPair> p);  // a pair handed over (hand_over): watched as p->peer()

  bool progress_pairs();
  bool check_sockets();
  bool arm();
  void disarm();

  // Shared with the devices this one hands pairs over to (hand_over): the rings live there.
  std::shared_ptr<Segment> own_ = std::make_shared<Segment>();  // inbound rings
  std::vector<std::shared_ptr<Segment>> peers_;                  // the segments holding our outbound rings
  std::vector<std::unique_ptr<ShmPair>> pairs_;  // by rank; null where not ours
  std::vector<ShmPair*> list_;                   // the non-null ones
  Fd epfd_, nudge_;
  transport::FailureSink* sink_;
  uint64_t probe_word_ = 0;  // peers read it with process_vm_readv to test cross-memory attach
  // We issue a membarrier between raising the waiting flags and the last look before a sleep
  // (shm_fence.hpp; our segment's header says so to the peers).
  bool waiter_membarrier_ = false;

  bool armed_ = false;
  unsigned polls_since_socket_check_ = 0;
};

}  // namespace kolo::shm

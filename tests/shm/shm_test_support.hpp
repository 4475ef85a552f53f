// Helpers for the shared-memory transport tests: bootstraps, ranks as threads or forked
// processes, an engine-like progress loop that sleeps on wait_fd(), payload patterns, and a
// look at /dev/shm for what this test process left there.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kolo/store.hpp"
#include "transports/transport.hpp"

namespace kolo::shmtest {

using transport::Failure;
using transport::Request;
using transport::Tag;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Records the first failure a device reports.
struct Sink : transport::FailureSink {
  mutable std::mutex mu;
  int peer = -1;
  Failure why = Failure::none;
  std::string detail;
  int reports = 0;
  void peer_failed(int p, Failure w, const std::string& d) override;
  Failure first() const;
};

struct Rank {
  Sink sink;
  std::unique_ptr<transport::Device> dev;
};

transport::Bootstrap make_bootstrap(Store& store, int rank, int size, Sink* sink, uint8_t secret_byte = 7,
                                    std::chrono::milliseconds timeout = 10s, const std::string& prefix = "shmtest");
// Makes rank `rank`'s device on that rank's own thread, through the in-process `store`.
using ConnectRank = std::function<std::unique_ptr<transport::Device>(Store& store, Rank& me, int rank,
                                                                     const std::vector<int>& peers)>;
// Connects `size` ranks, one thread each (connects block until their peers arrive), through one
// in-process store; throws with every rank's error if any failed.
std::vector<std::unique_ptr<Rank>> connect_threads(int size, const ConnectRank& connect);
// connect_threads over the shared-memory transport.
std::vector<std::unique_ptr<Rank>> connect_all(int size);

// Ranks 0 and 1 (threads) each send every size to the other, all posted at once, and check what
// arrives against an independently generated pattern(). `then` runs on each rank's thread after
// its requests ended (an orderly close, say) and returns what went wrong, if anything. Returns
// each rank's errors, "" where all was well.
std::vector<std::string> exchange_every_size(std::vector<std::unique_ptr<Rank>>& ranks, const std::vector<size_t>& sizes,
                                             std::chrono::milliseconds timeout,
                                             const std::function<std::string(transport::Device&)>& then = {});

// What drive() saw.
struct DriveStats {
  bool finished = false;  // no request left pending before the timeout
  int sleeps = 0;         // poll(2) calls on wait_fd() that slept (returned on timeout or fd)
  double seconds = 0;
};
// Drives `dev` as the engine does: poll(), and when nothing moved, sleep in poll(2) on wait_fd()
// for up to `sleep_cap`. A device that fails to wake its sleeper shows up as slowness.
DriveStats drive(transport::Device& dev, const std::vector<Request*>& reqs, std::chrono::milliseconds timeout = 10s,
                 std::chrono::milliseconds sleep_cap = 50ms);

Tag tag(uint64_t a);
// A tunable's default from the table in common/config.cpp (whatever the environment says).
size_t table_default(const char* name);
// Sizes around every boundary of the default geometry: empty, cache lines, a page, one slot's
// payload and one slot (each +-1), the cross-memory-attach threshold +-1, and large ones.
std::vector<size_t> boundary_sizes();
// A payload that differs per size and per seed, so misplaced or stale bytes are caught.
std::vector<uint8_t> pattern(size_t bytes, uint64_t seed);

// The job id this test process runs under (set in KOLO_JOB_ID for it and its children), so its
// shared-memory names are told apart from those of anything else running on the host.
const std::string& job_id();
// Entries of /dev/shm that this test process (or its children) created and that still exist.
std::vector<std::string> leftover_segments();

// Sets an environment variable for the scope of the object, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Forks a process that runs `body` and exits with its return value (1 if it threw; the
// message goes to stderr). Returns the child's pid.
pid_t fork_rank(const std::function<int()>& body);
// Waits for `pid` up to `timeout`; returns the exit status as waitpid reports it, or -1 after
// killing a child that did not end in time.
int wait_child(pid_t pid, std::chrono::milliseconds timeout = 20s);
// A fresh path for a FileStore shared by forked ranks.
std::string fresh_store_path();

}  // namespace kolo::shmtest

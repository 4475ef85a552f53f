// A test-only world of N ranks as N threads of this process, each with its own algo::Comm
// backed by in-memory FIFO queues per (sender, receiver) pair.
//
// It is deliberately strict, so that algorithm bugs surface as clear test failures:
//  - a send completes only once the peer has posted the matching receive (no eager
//    buffering), so an algorithm that waits for a send before posting the receive its peer
//    needs deadlocks here; every wait is bounded (HarnessOptions::deadline) and the failure
//    names the collective, the algorithm, the rank, the peer and the message;
//  - the bytes are copied only when one of the two sides waits for (or tests) the matched
//    pair, so a receive buffer read before wait() or a send buffer written before wait() shows
//    up as wrong data;
//  - a size mismatch between a send and the receive it meets, a message to oneself or to a
//    rank outside the group, a request never waited for, and a message nobody received all
//    fail the run;
//  - scratch memory is filled with garbage, and a slot asked for twice with a bigger size
//    fails (the group's real scratch reallocates, invalidating the first pointer);
//  - a failure on one rank aborts the others at once instead of letting them time out.
// reduce() and finalize() go through the real CPU kernels (kernels/cpu/reduce.hpp).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"

namespace kolo::testing {

struct HarnessOptions {
  size_t chunk_bytes = 64;  // small, so the chunked and pipelined paths run on small data
  std::chrono::milliseconds deadline{5000};  // per wait: far above any legitimate wait here
  // Host index of each rank, as Comm::hosts() reports it. Empty: pretend hosts of two
  // consecutive ranks (0,1), (2,3), ... (the last alone for an odd count), so every suite runs
  // the hierarchical algorithms across hosts, with a one-rank host when the count is odd.
  std::vector<int> hosts{};
};

class ThreadWorld {
 public:
  explicit ThreadWorld(int nranks, HarnessOptions opts = {});
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  int size() const;
  // Runs body(rank) on one thread per rank. Returns "" on success, else the first failure
  // (prefixed with `label`). Exceptions thrown by body are failures too.
  std::string run(const std::string& label, const std::function<void(int rank)>& body);
  // A Comm for `rank` running one collective with `args`; use it inside run()'s body.
  std::unique_ptr<algo::Comm> make_comm(int rank, const algo::CollArgs& args);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Runs `algo` once on args.size() ranks (rank r with args[r]). Returns "" or the failure,
// which names the collective and the algorithm.
std::string run_algorithm(const algo::Algorithm& algo, const std::vector<algo::CollArgs>& args,
                          const HarnessOptions& opts = {});

}  // namespace kolo::testing

// The DDP test worker: one rank, started by the gtest driver through ProcessWorld with RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT set. Each scenario checks its results and records
// failures here; main() prints them and exits 1 if any, 2 if kolo threw, 0 (after "OK rank R")
// otherwise.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include "kolo/kolo.hpp"

namespace kolo::ddptest {

struct Worker {
  int rank = 0;
  std::shared_ptr<ProcessGroup> group;
  size_t failures = 0;
  std::string current_case;

  void begin(const std::string& name) { current_case = name; }
  void expect(bool ok, const std::string& what) {
    if (ok) return;
    if (++failures <= 12) std::fprintf(stderr, "FAIL rank %d [%s] %s\n", rank, current_case.c_str(), what.c_str());
  }
  void say(const std::string& line) const {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
};

using Scenario = void (*)(Worker&);
void scenario_average(Worker& w);      // broadcast of params, exact mean, any mark order, stats
void scenario_no_sync(Worker& w);      // two accumulated steps, then a synced one
void scenario_overlap(Worker& w);      // the first bucket completes before finish()
void scenario_compression(Worker& w);  // float16 and bfloat16 hooks
void scenario_mismatch(Worker& w);     // rank 1 has a different layout
void scenario_peer_dies(Worker& w);    // rank 1 exits mid-step
void scenario_sharded(Worker& w);      // ShardedDataParallel: shards, mean, norm, gathers
void scenario_sharded_compression(Worker& w);  // its float16 and bfloat16 hooks
void scenario_sharded_mismatch(Worker& w);     // rank 1 runs DistributedDataParallel
void scenario_device(Worker& w);  // device buffers (stand-in or GPU): equal to the host reducer

}  // namespace kolo::ddptest

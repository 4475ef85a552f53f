// A barrier that says who is missing, as ProcessGroupGloo's monitoredBarrier does: every other
// rank sends rank 0 a message and waits for its answer; rank 0 waits up to the timeout for each
// and, when some did not arrive, raises naming them ("Rank 2 failed to pass monitoredBarrier in
// 2000 ms", or with wait_all_ranks "Ranks 1, 2 failed to pass ...", gloo's words); the others
// then time out waiting for rank 0's answer ("Timed out: ..."). Messages go over the
// point-to-point group with a tag of their own per call.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include <ATen/ATen.h>

#include "kolo/process_group.hpp"

namespace kolo_torch {

struct MonitoredBarrierState {
  std::mutex mu;
  uint32_t calls = 0;  // the same count on every rank: each call's tag
  // Receive buffers of ranks that never arrived: kolo may still write into them later.
  std::vector<at::Tensor> abandoned;
};

void monitored_barrier(kolo::ProcessGroup& p2p, MonitoredBarrierState& state, std::chrono::milliseconds timeout,
                       bool wait_all_ranks);

}  // namespace kolo_torch

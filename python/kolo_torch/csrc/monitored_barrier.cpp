#include "monitored_barrier.hpp"

#include <string>

#include <c10/util/Exception.h>

#include "errors.hpp"
#include "kolo/error.hpp"
#include "tensors.hpp"

namespace kolo_torch {

namespace {
// Tags above any a torch program passes to send/recv (small ints), one per call.
constexpr uint32_t kTagBase = 0xF0000000u;
}  // namespace

void monitored_barrier(kolo::ProcessGroup& p2p, MonitoredBarrierState& state, std::chrono::milliseconds timeout,
                       bool wait_all_ranks) {
  const int rank = p2p.rank();
  const int size = p2p.size();
  uint32_t tag;
  {
    std::lock_guard<std::mutex> lk(state.mu);
    tag = kTagBase + (state.calls++ % 0x0FFFFFFFu);
  }
  if (size == 1) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    auto l = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return l.count() > 0 ? l : std::chrono::milliseconds(1);
  };
  kolo::SendOptions so;
  so.tag = tag;
  so.timeout = timeout;
  kolo::RecvOptions ro;
  ro.tag = tag;
  ro.timeout = timeout;
  if (rank != 0) {
    at::Tensor token = at::zeros({1}, at::kInt);
    at::Tensor answer = at::zeros({1}, at::kInt);
    with_torch_errors([&] {
      auto s = p2p.send(move_buffer(token), 0, so);
      auto r = p2p.recv(move_buffer(answer), 0, ro);
      try {
        s->wait(left());
        r->wait(left());
      } catch (const kolo::TimeoutError&) {
        std::lock_guard<std::mutex> lk(state.mu);
        state.abandoned.push_back(token);
        state.abandoned.push_back(answer);
        throw kolo::TimeoutError("kolo: rank " + std::to_string(rank) + " waited " +
                                     std::to_string(timeout.count()) +
                                     " ms in monitored_barrier for rank 0's answer (rank 0 reports who did not arrive)",
                                 0);
      }
    });
    return;
  }
  // Rank 0: hear from every rank, then answer all.
  std::vector<at::Tensor> tokens;
  std::vector<kolo::WorkPtr> recvs;
  for (int r = 1; r < size; ++r) {
    tokens.push_back(at::zeros({1}, at::kInt));
    recvs.push_back(p2p.recv(move_buffer(tokens.back()), r, ro));
  }
  std::vector<int> missing;
  for (int r = 1; r < size; ++r) {
    auto& w = recvs[static_cast<size_t>(r - 1)];
    bool arrived = false;
    try {
      w->wait(left());
      arrived = true;
    } catch (const std::exception&) {
      // Not in time (or its connection failed): reported below.
    }
    if (!arrived) {
      missing.push_back(r);
      std::lock_guard<std::mutex> lk(state.mu);
      state.abandoned.push_back(tokens[static_cast<size_t>(r - 1)]);
      if (!wait_all_ranks) break;
    }
  }
  if (!missing.empty()) {
    if (!wait_all_ranks) {
      std::lock_guard<std::mutex> lk(state.mu);
      for (size_t i = static_cast<size_t>(missing.back()); i < tokens.size(); ++i) state.abandoned.push_back(tokens[i]);
    }
    std::string who;
    for (size_t i = 0; i < missing.size(); ++i) who += (i ? ", " : "") + std::to_string(missing[i]);
    TORCH_CHECK(false, "kolo: [Rank 0]: ", missing.size() > 1 ? "Ranks " : "Rank ", who,
                " failed to pass monitoredBarrier in ", timeout.count(), " ms");
  }
  at::Tensor answer = at::zeros({1}, at::kInt);
  std::vector<kolo::WorkPtr> sends;
  for (int r = 1; r < size; ++r) sends.push_back(p2p.send(move_buffer(answer), r, so));
  with_torch_errors([&] {
    for (auto& s : sends) s->wait(left());
  });
}

}  // namespace kolo_torch

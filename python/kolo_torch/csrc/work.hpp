// c10d::Work over one or more kolo::Work: completes when every part has, after running the
// operation's finish step (copying results out of staging buffers), and completes the
// c10::ivalue::Future that DDP's communication hooks chain on.
//
// An operation on CUDA tensors (built with KOLO_TORCH_CUDA) follows ProcessGroupNCCL's WorkNCCL:
// wait() makes torch's current stream wait for the result and returns without blocking the host
// (kolo's Work::wait_stream), synchronize() blocks the host until the result is in device memory,
// isCompleted() is true once it is. When kolo's host side is done, a side stream from torch's
// pool waits for the result (wait_stream), the finish step's copies run on it, the tensors are
// recorded on it for the caching allocator, and the future (made with the CUDA device) is
// completed with that stream current: torch's future records its events there, so whoever
// waits on the future (DDP's buckets, then() callbacks) is ordered after the GPU copies.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "kolo/work.hpp"
#include "tensors.hpp"

namespace kolo_torch {

class KoloWork : public c10d::Work {
 public:
  // `finish` runs once, after every part succeeded, on the thread that completes the last part;
  // `outputs` become the future's value. `keep` holds tensors the parts read or write (for a
  // CUDA operation every staging tensor the finish step uses must be among them or `outputs`:
  // they are recorded on the finishing stream before they are released). `device`: where the
  // tensors are (op_device()).
  static c10::intrusive_ptr<KoloWork> start(int rank, c10d::OpType type, std::vector<kolo::WorkPtr> parts,
                                            std::vector<at::Tensor> outputs, std::function<void()> finish = {},
                                            std::vector<at::Tensor> keep = {}, OpDevice device = {});

  // One Work over several: completes when all have (their own finish steps ran first).
  static c10::intrusive_ptr<KoloWork> join(int rank, c10d::OpType type, const std::vector<c10::intrusive_ptr<KoloWork>>& works,
                                           std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;
  // A receive's sender (dist.recv's return value, irecv's work.source_rank()): the kolo
  // receive's source_rank(), or the rank set_source() named (a receive that moved nothing).
  // Other operations: c10d::Work's refusal.
  int sourceRank() const override;
  void set_source(int rank) { source_ = rank; }

  // The state that kolo's completion callbacks share with this Work (they must not own the Work:
  // a dropped isend handle would otherwise live forever in its kolo::Work's callback list).
  struct State;

  KoloWork(int rank, c10d::OpType type, std::vector<kolo::WorkPtr> parts, std::shared_ptr<State> state);

 private:
  bool wait_device(std::chrono::milliseconds timeout);

  std::vector<kolo::WorkPtr> parts_;
  std::shared_ptr<State> state_;
  int source_ = -1;
};

}  // namespace kolo_torch

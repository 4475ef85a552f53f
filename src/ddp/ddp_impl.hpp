// Internal: the state of a DistributedDataParallel, shared by ddp.cpp and no_sync.cpp.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "kolo/ddp.hpp"

namespace kolo {

struct DistributedDataParallel::Impl {
  using Clock = std::chrono::steady_clock;

  // When a bucket's all-reduce completed. Written by the Work's on_complete callback on the
  // group's executor thread, hence shared (it may outlive a destroyed reducer) and atomic.
  struct Completion {
    std::atomic<Clock::rep> at{0};
    std::atomic<bool> set{false};
    void record() {
      at = Clock::now().time_since_epoch().count();
      set = true;
    }
  };

  // One bucket's collectives in the current step: its all-reduce, or its reduce-scatter and the
  // all-reduce of its tail (Reduction::reduce_scatter).
  struct BucketRun {
    WorkPtr work;       // null for an empty bucket (nothing to send)
    WorkPtr tail_work;  // the tail's all-reduce, when the bucket has one
    Clock::time_point started;
    std::shared_ptr<Completion> done;
  };

  std::shared_ptr<ProcessGroup> group;
  float* params = nullptr;
  float* grads = nullptr;
  size_t total = 0;
  std::vector<DdpParam> layout;
  DdpOptions opts;
  Reduction reduction = Reduction::allreduce;
  std::vector<DdpBucket> plan;
  std::vector<size_t> bucket_of_param;
  std::vector<std::vector<uint16_t>> scratch;  // per bucket, for compressed buckets only

  // Per-step state, reset by finish().
  std::vector<uint8_t> marked;
  std::vector<size_t> pending;  // per bucket: parameters not yet marked (outside no_sync)
  std::vector<BucketRun> runs;  // indexed by bucket; valid below next_launch
  size_t next_launch = 0;       // buckets start strictly in order: this one is next
  size_t marks_this_step = 0;
  std::exception_ptr launch_error;  // an all-reduce that could not be issued this step

  int no_sync_depth = 0;  // live NoSync guards
  StepStats last_stats;

  void mark(size_t index);
  void launch(size_t bucket);
  void issue_reduce_scatter(size_t bucket, const Buffer& data, const AllreduceOptions& o, BucketRun& run);
  void unpack(size_t bucket);
  void launch_ready_buckets();
  void wait_bounded(Work& work) const;
  void reset_step();
  void abort_in_flight(const char* reason) noexcept;
};

}  // namespace kolo

// Scenarios that are meant to fail (the driver asserts how): a long allreduce loop for the
// killed / stopped rank tests, mismatched collectives and counts, and a plain join for the
// wrong-secret test. The error itself is printed by worker_main.cpp.
#include <chrono>
#include <string>
#include <vector>

#include "reference.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {

// Allreduces 16 Ki floats (or as many as the first argument says) over and over, checking every
// result, until kolo throws (the driver kills or stops a rank meanwhile) or 60 s pass. Prints
// "loop started" after the first one.
void scenario_allreduce_loop(WorkerContext& ctx) {
  ProcessGroup& group = ctx.join();
  const size_t kCount = ctx.args.empty() ? 16 * 1024 : std::stoul(ctx.args[0]);
  const ReduceOp op = ReduceKind::sum;
  std::vector<float> data(kCount);
  const ReduceReference ref(DataType::float32, op, group.size());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int iteration = 0; std::chrono::steady_clock::now() < until; ++iteration) {
    ctx.log.begin_case("iteration " + std::to_string(iteration));
    for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(ref.input(group.rank(), i));
    group.allreduce(Buffer(data.data(), kCount))->wait();
    ctx.log.expect_elements("result", DataType::float32, data.data(), kCount,
                            [&](size_t i) { return ref.expected(i); });
    if (iteration == 0) ctx.say("loop started");
  }
  ctx.log.end_case();
}

// After a mismatched collective, a barrier: a rank whose own part of the mismatched call could
// complete (a broadcast root only sends) must still learn of the failure at its next call.
void barrier_after_mismatch(WorkerContext& ctx, ProcessGroup& group) {
  ctx.log.begin_case("barrier after the mismatched collective");
  group.barrier()->wait();
  ctx.say("the group still worked after a mismatched collective");
}

// Rank 0 broadcasts while every other rank allreduces (same count): all must fail.
void scenario_mismatch_collective(WorkerContext& ctx) {
  ProcessGroup& group = ctx.join();
  std::vector<float> data(1000, 1.0f);
  ctx.log.begin_case(group.rank() == 0 ? "broadcast of 1000" : "allreduce of 1000");
  if (group.rank() == 0) {
    group.broadcast(Buffer(data.data(), data.size()))->wait();
  } else {
    group.allreduce(Buffer(data.data(), data.size()))->wait();
  }
  barrier_after_mismatch(ctx, group);
}

// Every rank allreduces, but the last rank with a different count: all must fail.
void scenario_mismatch_count(WorkerContext& ctx) {
  ProcessGroup& group = ctx.join();
  const size_t count = group.rank() == group.size() - 1 ? 1001 : 1000;
  std::vector<float> data(count, 1.0f);
  ctx.log.begin_case("allreduce of " + std::to_string(count));
  group.allreduce(Buffer(data.data(), data.size()))->wait();
  barrier_after_mismatch(ctx, group);
}

// Joins the group, passes one barrier, leaves.
void scenario_join(WorkerContext& ctx) {
  ProcessGroup& group = ctx.join();
  group.barrier()->wait();
  ctx.say("joined");
}

}  // namespace kolo::coltest

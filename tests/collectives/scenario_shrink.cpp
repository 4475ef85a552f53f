// ProcessGroup::shrink with real processes (test_shrink.cpp drives them; scripts/check/
// shrink_trials.sh times them). Every rank joins through init_from_env, whose store the launcher
// hosts (KOLO_STORE_ADDR: the driver's, or kolorun's), so that it outlives any rank.
//
//   shrink MODE VICTIM [SEED [SELF_KILL_AT]]
//     kill    loop random collectives until one fails (the driver SIGKILLs VICTIM, or VICTIM
//             SIGKILLs itself before its SELF_KILL_AT-th), then shrink (whoever answers)
//     named   the same, then shrink({VICTIM})
//     request no failure: 3 all-reduces, then every rank calls shrink({VICTIM}); VICTIM gets
//             nullptr
//     fresh   no shrink: join, one all-reduce, print when it was done (the restart a shrink
//             saves, for the trials' ratio)
//     stop    the driver SIGSTOPs VICTIM: the others time out and shrink (whoever answers,
//             within KOLO_SHRINK_TEST_MS) and go on; the driver wakes VICTIM after they are done:
//             its shrink must refuse it (ExcludedError naming generation 1), which it prints
// The survivors then check an all-reduce, broadcasts from the first and the last rank and an
// all-gather on the shrunk group element by element, at two sizes, and print
//   "shrunk: generation G rank r of n (was R); first collective done at <steady ns>; <ms> ms after the failure"
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "reformed_group_check.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// Random collectives of random sizes on the old group, the same on every rank (one seed), until
// one fails. Returns the error's text; "" if none failed within 60 s.
std::string loop_until_failure(WorkerContext& ctx, ProcessGroup& g, uint64_t seed, int self_kill_at, int victim) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> a, b;
  const auto until = Clock::now() + std::chrono::seconds(60);
  for (int i = 0; Clock::now() < until; ++i) {
    if (i == 1) ctx.say("loop started");
    if (i == self_kill_at && g.rank() == victim) raise(SIGKILL);
    const size_t count = 1 + rng() % (64 * 1024);
    const int kind = static_cast<int>(rng() % 3);
    a.assign(count, g.rank() + 1);
    try {
      if (kind == 0) {
        g.allreduce(Buffer(a.data(), count))->wait();
      } else if (kind == 1) {
        BroadcastOptions o;
        o.root = static_cast<int>(rng() % static_cast<uint64_t>(g.size()));
        g.broadcast(Buffer(a.data(), count), o)->wait();
      } else {
        b.assign(count * static_cast<size_t>(g.size()), 0);
        g.allgather(Buffer(a.data(), count), Buffer(b.data(), b.size()))->wait();
      }
    } catch (const Error& e) {
      return e.what();
    }
  }
  return "";
}


}  // namespace

void scenario_shrink(WorkerContext& ctx) {
  if (ctx.args.size() < 2) throw InvalidArgument("shrink: expected MODE VICTIM [SEED [SELF_KILL_AT]]");
  const std::string mode = ctx.args[0];
  const int victim = std::stoi(ctx.args[1]);
  const uint64_t seed = ctx.args.size() > 2 ? std::stoull(ctx.args[2]) : 1;
  const int self_kill_at = ctx.args.size() > 3 ? std::stoi(ctx.args[3]) : -1;
  const char* ms = std::getenv("KOLO_SHRINK_TEST_MS");
  ShrinkOptions opts;
  opts.timeout = std::chrono::milliseconds(ms != nullptr ? std::atoi(ms) : 5000);
  if (mode == "fresh") {
    // The peer of a shrink: what a restart costs at least (processes start, a group forms, one
    // collective), without loading a checkpoint or importing a framework.
    ProcessGroup& g = ctx.join();
    std::vector<int32_t> one(1, 1);
    g.allreduce(Buffer(one.data(), 1))->wait();
    ctx.log.expect(one[0] == g.size(), "first all-reduce of a fresh group: " + std::to_string(one[0]));
    ctx.say("fresh: first collective done at " + std::to_string(now_ns()));
    return;
  }
  ProcessGroup& world = ctx.join();
  const int old_rank = world.rank();

  std::shared_ptr<ProcessGroup> next;
  Clock::time_point failed_at;
  if (mode == "request") {
    std::vector<int32_t> x(100, 1);
    for (int i = 0; i < 3; ++i) world.allreduce(Buffer(x.data(), x.size()))->wait();
    // In flight when shrink aborts the old group: a receive no rank will match. It must end with
    // an error, not hang (the driver's deadline would catch a hang).
    int32_t never = 0;
    RecvOptions ro;
    ro.tag = 99;
    WorkPtr in_flight = world.recv(Buffer(&never, 1), (old_rank + 1) % world.size(), ro);
    failed_at = Clock::now();
    next = world.shrink({victim}, opts);
    try {
      in_flight->wait();
      ctx.log.expect(false, "the receive in flight on the old group completed");
    } catch (const Error& e) {
      ctx.say(std::string("in-flight receive ended: ") + e.what());
    }
    if (old_rank == victim) {
      ctx.log.expect(next == nullptr, "the excluded rank got nullptr from shrink({" + std::to_string(victim) + "})");
      ctx.say("excluded as asked");
      ctx.group.reset();
      return;
    }
  } else {
    const std::string error = loop_until_failure(ctx, world, seed, self_kill_at, victim);
    failed_at = Clock::now();
    if (error.empty()) throw Error("shrink: no collective failed within 60 s");
    ctx.say("old group failed: " + error);
    if (mode == "stop" && old_rank == victim) {
      // Woken after the others shrank without it: it must be refused, never join or hang.
      try {
        next = world.shrink(opts);
      } catch (const ExcludedError& e) {
        ctx.log.expect(e.generation() == 1, "ExcludedError names generation 1, not " + std::to_string(e.generation()));
        ctx.log.expect(std::string(e.what()).find("excluded from generation 1") != std::string::npos,
                       std::string("the refusal says so: ") + e.what());
        ctx.say(std::string("refused: ") + e.what());
        ctx.group.reset();
        return;
      }
      ctx.log.expect(false, "the stopped rank joined the shrunk group (rank " + std::to_string(next->rank()) + ")");
      return;
    }
    next = mode == "named" ? world.shrink({victim}, opts) : world.shrink(opts);
  }
  ctx.log.expect(next != nullptr, "a survivor got a group");
  const int want_rank = old_rank - (old_rank > victim ? 1 : 0);
  ctx.log.expect(next->size() == ctx.world - 1, "shrunk size " + std::to_string(next->size()));
  ctx.log.expect(next->rank() == want_rank, "shrunk rank " + std::to_string(next->rank()) + ", want " + std::to_string(want_rank));
  ctx.log.expect(next->generation() == 1, "generation " + std::to_string(next->generation()));
  std::vector<int32_t> first(1, 1);
  next->allreduce(Buffer(first.data(), 1))->wait();
  const auto first_done = Clock::now();
  ctx.log.expect(first[0] == next->size(), "first all-reduce on the shrunk group: " + std::to_string(first[0]));
  const int64_t first_ns = now_ns();
  check_reformed_group(ctx, *next, "shrunk");
  ctx.say("shrunk: generation " + std::to_string(next->generation()) + " rank " + std::to_string(next->rank()) + " of " +
          std::to_string(next->size()) + " (was " + std::to_string(old_rank) + "); first collective done at " +
          std::to_string(first_ns) + "; " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(first_done - failed_at).count()) +
          " ms after the failure");
  // The old group is aborted: drop it, and let main() shut the new one down.
  ctx.group = next;
}

}  // namespace kolo::coltest

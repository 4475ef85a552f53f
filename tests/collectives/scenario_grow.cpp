// ProcessGroup::grow and ::join with real processes (test_grow.cpp drives them). Members join
// through init_from_env, joiners through join_from_env; both use the store the driver hosts
// (KOLO_STORE_ADDR), so that it outlives every rank.
//
//   grow MODE [VICTIM]
//     member      grow() with nobody waiting must give nullptr on every member; then the members
//                 print "ready to grow" and grow (waiting up to 30 s for one joiner)
//     shrink-grow VICTIM SIGKILLs itself before the 3rd all-reduce; the others shrink, print
//                 "ready to grow" and grow back (waiting up to 30 s for one joiner)
//     joiner      join_from_env (KOLO_GROW_JOIN_MS bounds the wait, default 30 s)
//     idle        grow() with nobody waiting (a joiner that timed out earlier must not be admitted
//                 now: it withdrew), then shut down, which closes the line for later joiners
//     late        a joiner that must be refused: TimeoutError or ExcludedError, which it prints
//     cost N      what a grow() with nobody waiting costs: N calls, against N broadcasts of the
//                 32 bytes grow broadcasts (the peer, same run); rank 0 prints both per call
// Members and joiners of a grown group then check an all-reduce, broadcasts from rank 0 and
// from the last rank (a joiner) and an all-gather element by element, at two sizes, and print
//   "grown: generation G rank r of n"
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "reformed_group_check.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

using std::chrono::milliseconds;


void report_grown(WorkerContext& ctx, const std::shared_ptr<ProcessGroup>& g, int want_rank, int want_size, int want_gen) {
  ctx.log.expect(g != nullptr, "a group to check");
  if (!g) return;
  ctx.log.expect(g->rank() == want_rank, "grown rank " + std::to_string(g->rank()) + ", want " + std::to_string(want_rank));
  ctx.log.expect(g->size() == want_size, "grown size " + std::to_string(g->size()) + ", want " + std::to_string(want_size));
  ctx.log.expect(g->generation() == want_gen,
                 "generation " + std::to_string(g->generation()) + ", want " + std::to_string(want_gen));
  check_reformed_group(ctx, *g, "grown");
  ctx.say("grown: generation " + std::to_string(g->generation()) + " rank " + std::to_string(g->rank()) + " of " +
          std::to_string(g->size()));
  ctx.group = g;  // main() shuts it down
}

GrowOptions wait_for_one() {
  GrowOptions o;
  o.wait = milliseconds(30000);
  o.max_joiners = 1;
  return o;
}

}  // namespace

void scenario_grow(WorkerContext& ctx) {
  if (ctx.args.empty()) throw InvalidArgument("grow: expected MODE [VICTIM]");
  const std::string mode = ctx.args[0];
  const char* join_ms = std::getenv("KOLO_GROW_JOIN_MS");
  JoinOptions jo;
  jo.timeout = milliseconds(join_ms != nullptr ? std::atoi(join_ms) : 30000);

  if (mode == "joiner") {
    // The members' sizes and generations are the driver's to know: it passes them.
    const int want_rank = std::stoi(ctx.args.at(1)), want_size = std::stoi(ctx.args.at(2)), want_gen = std::stoi(ctx.args.at(3));
    report_grown(ctx, join_from_env({}, jo), want_rank, want_size, want_gen);
    return;
  }
  if (mode == "late") {
    try {
      auto g = join_from_env({}, jo);
      ctx.log.expect(false, "a late joiner was admitted as rank " + std::to_string(g->rank()));
    } catch (const ExcludedError& e) {
      ctx.say(std::string("join refused (ExcludedError, generation ") + std::to_string(e.generation()) + "): " + e.what());
    } catch (const TimeoutError& e) {
      ctx.say(std::string("join timed out (TimeoutError): ") + e.what());
    }
    return;
  }

  ProcessGroup& world = ctx.join();
  if (mode == "idle") {
    auto none = world.grow();
    ctx.log.expect(none == nullptr, "grow with nobody waiting gave a group of " + std::to_string(none ? none->size() : 0));
    ctx.say("nobody waiting: nullptr");
    return;  // main() shuts the world down: rank 0 closes the line
  }
  if (mode == "cost") {
    const int n = std::stoi(ctx.args.at(1));
    using Clock = std::chrono::steady_clock;
    auto per_call_us = [n](Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count() / n; };
    int64_t four[4] = {0, 0, 0, 0};
    world.barrier()->wait();
    auto t = Clock::now();
    for (int i = 0; i < n; ++i) world.broadcast(Buffer(four, 4))->wait();
    const double bcast = per_call_us(t);
    world.barrier()->wait();
    t = Clock::now();
    int admitted = 0;
    for (int i = 0; i < n; ++i) admitted += world.grow() != nullptr;
    const double grow = per_call_us(t);
    ctx.log.expect(admitted == 0, "grow with nobody waiting admitted someone");
    char line[200];
    std::snprintf(line, sizeof line, "cost on rank %d: grow with nobody waiting %.1f us per call, a 32-byte broadcast %.1f us (%.1fx)",
                  world.rank(), grow, bcast, grow / bcast);
    ctx.say(line);
    return;
  }
  std::shared_ptr<ProcessGroup> base = ctx.group;
  const int old_rank = world.rank();
  int want_gen = 1;
  if (mode == "member") {
    for (int i = 0; i < 3; ++i) {  // every call decides the same, on every member
      auto none = world.grow();
      ctx.log.expect(none == nullptr, "grow with nobody waiting gave a group");
    }
    ctx.say("nobody waiting: nullptr");
  } else if (mode == "shrink-grow") {
    const int victim = std::stoi(ctx.args.at(1));
    std::vector<int32_t> x(1000, 1);
    std::string error;
    for (int i = 0; i < 1000 && error.empty(); ++i) {
      if (i == 2 && old_rank == victim) raise(SIGKILL);
      try {
        world.allreduce(Buffer(x.data(), x.size()))->wait();
      } catch (const Error& e) {
        error = e.what();
      }
    }
    ctx.log.expect(!error.empty(), "a collective failed after the victim died");
    base = world.shrink();
    ctx.say("shrunk: generation " + std::to_string(base->generation()) + " rank " + std::to_string(base->rank()) + " of " +
            std::to_string(base->size()));
    auto none = base->grow();
    ctx.log.expect(none == nullptr, "grow of the shrunk group with nobody waiting gave a group");
    want_gen = 2;
  } else {
    throw InvalidArgument("grow: unknown mode '" + mode + "'");
  }
  ctx.say("ready to grow");
  auto grown = base->grow(wait_for_one());
  report_grown(ctx, grown, base->rank(), base->size() + 1, want_gen);
}

}  // namespace kolo::coltest

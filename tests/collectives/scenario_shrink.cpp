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
//     twice   as request, then the shrunk group shrinks again without its last rank (generation
//             2), checked the same way; prints "twice: generation 2 rank r of n; new sockets: N"
//     inflight  no loop: traffic in flight both ways between the survivors (a large message
//             that may be mid-transfer, one nobody receives, a receive nobody sends to), VICTIM
//             SIGKILLs itself SEED % 3000 us after; then shrink({VICTIM}), and the checks below
//             plus point-to-point with the old messages' tags and sizes
//     stop    the driver SIGSTOPs VICTIM: the others time out and shrink (whoever answers,
//             within KOLO_SHRINK_TEST_MS) and go on; the driver wakes VICTIM after they are done:
//             its shrink must refuse it (ExcludedError naming generation 1), which it prints
// The survivors then check an all-reduce, broadcasts from the first and the last rank and an
// all-gather on the shrunk group element by element, at two sizes, and print
//   "shrunk: generation G rank r of n (was R); first collective done at <steady ns>; <ms> ms after the failure"
// and, before that, "new sockets: N" (the sockets the shrink opened: 0 when every connection
// between survivors was kept)
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <set>
#include <thread>
#include <cstdio>
#include <cstring>
#include <future>
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


// The sockets this process holds (their inodes, from /proc/self/fd), so that a survivor can tell
// whether shrink opened new connections or kept its old ones.
std::set<std::string> sockets_held() {
  std::set<std::string> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char link[128];
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    if (std::strncmp(link, "socket:", 7) == 0) out.insert(link);
  }
  ::closedir(d);
  return out;
}

// Mode "inflight": the old group dies with traffic in flight both ways on every survivor's
// pairs: a 6 MiB message it sends to the next survivor (matched by a receive there, so it may
// be mid-transfer), a 1 MiB one behind it that nobody receives (mid-transfer in the ring or the
// socket), a 6 MiB receive from the previous survivor, and a receive from the next one that
// nobody sends. The victim kills itself `delay_us` after the others have posted. Returns the
// error that ended the old group's traffic.
std::string traffic_until_victim_dies(WorkerContext& ctx, ProcessGroup& g, int victim, int delay_us) {
  std::vector<int32_t> x(1000, 1);
  // Everyone connected and here. The victim may leave this all-reduce first and die before a
  // slower rank has its last piece: then the old group already failed here, and the shrink
  // that follows still has to work (without traffic in flight, this once).
  try {
    g.allreduce(Buffer(x.data(), x.size()))->wait();
  } catch (const Error& e) {
    ctx.say("the old group failed before its traffic was posted");
    return e.what();
  }
  const int n = g.size(), me = g.rank();
  if (me == victim) {
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    raise(SIGKILL);
  }
  auto step = [&](int r, int d) {
    do r = (r + d + n) % n;
    while (r == victim);
    return r;
  };
  const int next = step(me, 1), prev = step(me, -1);
  std::vector<int32_t> big_out((6 << 20) / 4, 0x0BAD0000 | me), stale_out((1 << 20) / 4, 0x5A5A5A5A), big_in((6 << 20) / 4, 0);
  int32_t never[5] = {};
  SendOptions s7, s5;
  s7.tag = 7;
  s5.tag = 5;
  RecvOptions r7, r6;
  r7.tag = 7;
  r6.tag = 6;
  std::vector<WorkPtr> works;
  works.push_back(g.send(Buffer(big_out.data(), big_out.size()), next, s7));
  works.push_back(g.send(Buffer(stale_out.data(), stale_out.size()), next, s5));
  works.push_back(g.recv(Buffer(big_in.data(), big_in.size()), prev, r7));
  works.push_back(g.recv(Buffer(never, 5), next, r6));
  ctx.say("loop started");
  std::string error;
  for (auto& w : works) {
    try {
      w->wait();
    } catch (const Error& e) {
      if (error.empty()) error = e.what();
    }
  }
  return error;
}

// On the shrunk group, point-to-point around the ring with the tags and sizes of the old
// group's messages: each must carry this generation's pattern.
void check_point_to_point(WorkerContext& ctx, ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<int32_t> out5((1 << 20) / 4), in5(out5.size(), -1), out7((6 << 20) / 4), in7(out7.size(), -1);
  for (size_t i = 0; i < out5.size(); ++i) out5[i] = static_cast<int32_t>(me * 1000003 + i);
  for (size_t i = 0; i < out7.size(); ++i) out7[i] = static_cast<int32_t>(me * 7919 + 3 * i);
  SendOptions s7, s5;
  s7.tag = 7;
  s5.tag = 5;
  RecvOptions r7, r5;
  r7.tag = 7;
  r5.tag = 5;
  std::vector<WorkPtr> works = {g.recv(Buffer(in7.data(), in7.size()), prev, r7), g.recv(Buffer(in5.data(), in5.size()), prev, r5),
                                g.send(Buffer(out7.data(), out7.size()), next, s7), g.send(Buffer(out5.data(), out5.size()), next, s5)};
  for (auto& w : works) w->wait();
  size_t bad = 0;
  for (size_t i = 0; i < in5.size(); ++i) bad += in5[i] != static_cast<int32_t>(prev * 1000003 + i);
  for (size_t i = 0; i < in7.size(); ++i) bad += in7[i] != static_cast<int32_t>(prev * 7919 + 3 * i);
  ctx.log.expect(bad == 0, "point-to-point on the shrunk group: " + std::to_string(bad) + " element(s) differ");
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
  std::set<std::string> sockets_before;
  if (mode == "inflight") {
    const std::string error = traffic_until_victim_dies(ctx, world, victim, static_cast<int>(seed % 3000));
    failed_at = Clock::now();
    if (error.empty()) throw Error("shrink: the traffic in flight completed although rank " + std::to_string(victim) + " died");
    ctx.say("old group failed: " + error);
    sockets_before = sockets_held();
    next = world.shrink({victim}, opts);
  } else if (mode == "request" || mode == "twice") {
    std::vector<int32_t> x(100, 1);
    // A rank done with the last all-reduce may shrink (and so abort the group) while a peer still
    // waits for that all-reduce's last message from a third rank: the peer then learns of the
    // shrink from its error, and shrinks too.
    for (int i = 0; i < 3; ++i) {
      try {
        world.allreduce(Buffer(x.data(), x.size()))->wait();
      } catch (const Error& e) {
        ctx.say(std::string("a peer shrank first: ") + e.what());
        break;
      }
    }
    // In flight when shrink aborts the old group: a receive no rank will match. It must end with
    // an error, not hang (the driver's deadline would catch a hang).
    int32_t never = 0;
    RecvOptions ro;
    ro.tag = 99;
    WorkPtr in_flight = world.recv(Buffer(&never, 1), (old_rank + 1) % world.size(), ro);
    failed_at = Clock::now();
    sockets_before = sockets_held();
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
  } else if (mode == "callback") {
    // The old group fails (the victim leaves it) under a receive whose completion callback
    // shrinks: the callback runs on the thread that completes the receive, the group's engine
    // thread, in the middle of failing the group. The shrink must not wait on that thread.
    std::vector<int32_t> x(100, 1);
    world.allreduce(Buffer(x.data(), x.size()))->wait();  // everyone is here
    if (old_rank == victim) {
      // Late enough that the others' receives wait (their callbacks then run on the engine thread).
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      next = world.shrink({victim}, opts);
      ctx.log.expect(next == nullptr, "the excluded rank got nullptr from shrink({" + std::to_string(victim) + "})");
      ctx.say("excluded as asked");
      ctx.group.reset();
      return;
    }
    int32_t never = 0;
    RecvOptions ro;
    ro.tag = 99;
    WorkPtr in_flight = world.recv(Buffer(&never, 1), (old_rank + 1) % world.size(), ro);
    auto result = std::make_shared<std::promise<std::shared_ptr<ProcessGroup>>>();
    std::future<std::shared_ptr<ProcessGroup>> shrunk = result->get_future();
    sockets_before = sockets_held();
    in_flight->on_complete([&world, victim, opts, result](Work&) {
      try {
        result->set_value(world.shrink({victim}, opts));
      } catch (...) {
        result->set_exception(std::current_exception());
      }
    });
    failed_at = Clock::now();
    if (shrunk.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ctx.say("the shrink from the completion callback did not return within 20 s (a hang)");
      std::fflush(nullptr);
      std::_Exit(3);  // the engine thread is stuck: no orderly exit
    }
    next = shrunk.get();
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
    sockets_before = sockets_held();
    next = mode == "named" ? world.shrink({victim}, opts) : world.shrink(opts);
  }
  // Sockets the shrink opened (the old group, still held, keeps its own): none where every
  // survivor's connection to every other was kept.
  size_t opened = 0;
  for (const auto& sock : sockets_held()) opened += sockets_before.count(sock) == 0 ? 1 : 0;
  ctx.say("new sockets: " + std::to_string(opened));
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
  if (mode == "inflight") check_point_to_point(ctx, *next);
  ctx.say("shrunk: generation " + std::to_string(next->generation()) + " rank " + std::to_string(next->rank()) + " of " +
          std::to_string(next->size()) + " (was " + std::to_string(old_rank) + "); first collective done at " +
          std::to_string(first_ns) + "; " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(first_done - failed_at).count()) +
          " ms after the failure");
  if (mode == "twice") {
    // The shrunk group shrinks again, without its last rank: the connections it kept from the
    // first shrink are handed over once more.
    const int last = next->size() - 1;
    const int mid_rank = next->rank();
    const auto before = sockets_held();
    std::shared_ptr<ProcessGroup> third = next->shrink({last}, opts);
    if (mid_rank == last) {
      ctx.log.expect(third == nullptr, "the rank excluded the second time got nullptr");
      ctx.say("excluded the second time");
      ctx.group.reset();
      return;
    }
    ctx.log.expect(third != nullptr && third->generation() == 2 && third->size() == last && third->rank() == mid_rank,
                   "the second shrink gave generation 2 of " + std::to_string(last) + " ranks with this rank's place");
    check_reformed_group(ctx, *third, "shrunk twice");
    size_t opened2 = 0;
    for (const auto& sock : sockets_held()) opened2 += before.count(sock) == 0 ? 1 : 0;
    ctx.say("twice: generation 2 rank " + std::to_string(third->rank()) + " of " + std::to_string(third->size()) +
            "; new sockets: " + std::to_string(opened2));
    next = third;
  }
  // The old group is aborted: drop it, and let main() shut the new one down.
  ctx.group = next;
}

}  // namespace kolo::coltest

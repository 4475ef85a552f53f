// Scenarios about how many connections a group opens (run with KOLO_TRANSPORT=tcp, the driver
// choosing KOLO_CONNECT): test_connections.cpp checks what they print.
//
// "sockets": counts the sockets this process holds (/proc/self/fd) after joining, then after
// ring all-reduces, then after an all-to-all, and prints the growth: "sockets ring +N" and
// "sockets alltoall +N". Lazily a ring needs 2 connections per rank and an all-to-all all of them;
// eagerly every one is open after joining (+0, +0). Then "sockets split +N": what creating a
// subgroup of half the ranks opened (lazily its listener only; eagerly its mesh).
//
// "dead-before-connect": the last rank joins and exits at once, before anyone has talked to it;
// the others run a ring all-reduce and must fail with an error naming it, well within KOLO_TIMEOUT.
// With the argument "stop" it stops itself (SIGSTOP) instead: its port still accepts connections
// but nobody answers them, and the others must time out naming it.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "worker_context.hpp"
#include "open_sockets.hpp"

namespace kolo::coltest {
namespace {

using kolo::testing_support::open_sockets;

void ring_allreduce(ProcessGroup& g, CheckLog& log) {
  std::vector<float> v(8192, 1.0f);
  AllreduceOptions o;
  o.algorithm = "ring";
  g.allreduce(Buffer(v.data(), v.size()), o)->wait();
  log.expect(v[0] == static_cast<float>(g.size()) && v.back() == static_cast<float>(g.size()), "ring all-reduce sum");
}

// Repeats `op` until the growth over `base` equals `want` on every rank (a connection that lost
// a simultaneous-connect race closes only once its peer has answered), or 20 rounds pass. Every
// rank runs the same collectives: the verdict is agreed by a (ring) all-reduce of min.
template <class Op>
int growth_after(ProcessGroup& g, int base, int want, Op op) {
  int grown = 0;
  for (int i = 0; i < 20; ++i) {
    op();
    grown = open_sockets() - base;
    int32_t settled = grown == want ? 1 : 0;
    AllreduceOptions o;
    o.algorithm = "ring";
    o.op = ReduceKind::min;
    g.allreduce(Buffer(&settled, 1), o)->wait();
    if (settled == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return grown;
}

}  // namespace

void scenario_sockets(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  const int n = g.size();
  const int base = open_sockets();
  ctx.log.begin_case("ring all-reduce");
  const int ring = growth_after(g, base, 2, [&] { ring_allreduce(g, ctx.log); });
  ctx.say("sockets ring +" + std::to_string(ring));
  ctx.log.begin_case("all-to-all");
  std::vector<int32_t> out(static_cast<size_t>(n)), in(static_cast<size_t>(n), -1);
  for (int p = 0; p < n; ++p) out[static_cast<size_t>(p)] = g.rank() * 100 + p;
  g.alltoall(Buffer(out.data(), out.size()), Buffer(in.data(), in.size()))->wait();
  for (int p = 0; p < n; ++p) ctx.log.expect(in[static_cast<size_t>(p)] == p * 100 + g.rank(), "all-to-all value");
  const int all = growth_after(g, base, n - 1, [&] { ring_allreduce(g, ctx.log); });
  ctx.say("sockets alltoall +" + std::to_string(all));
  // A subgroup: lazily its creation opens its listener and no connection; eagerly its full mesh.
  ctx.log.begin_case("split");
  const int before_split = open_sockets();
  std::shared_ptr<ProcessGroup> half = g.split(g.rank() % 2, g.rank());
  ctx.say("sockets split +" + std::to_string(open_sockets() - before_split));
  ring_allreduce(*half, ctx.log);
  half->shutdown();
}

void scenario_dead_before_connect(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  if (g.rank() == g.size() - 1) {
    if (!ctx.args.empty() && ctx.args[0] == "stop") {
      ctx.say("stopping before any connection");
      raise(SIGSTOP);  // the driver kills it once the others are done
    }
    ctx.say("exiting before any connection");
    _exit(0);  // no goodbye, no shutdown: as a crash right after joining
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // it is gone by now
  ctx.log.begin_case("ring all-reduce with a dead rank");
  ring_allreduce(g, ctx.log);
}

}  // namespace kolo::coltest

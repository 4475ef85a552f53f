// Scenarios "any-source" and "any-source-fails": receives from any source (kAnySource) between
// real processes.
//
// "any-source" (2+ ranks, every rank exits OK only if every check held):
//  - every other rank sends rank 0 one message with one tag, in an order that changes from round
//    to round (staggered sleeps); rank 0's world - 1 any-source receives get each sender exactly
//    once, with its exact data, and source_rank() names it;
//  - any-source receives mixed with a receive from a named rank on the same tag (3+ ranks): the
//    counts of each pair stay right whichever message the any-source receive takes first;
//  - a message with another tag at the head of a pair is no candidate (and stays for its own
//    receive), and neither is a later collective's message: the any-source receive waits for
//    the matching one behind them;
//  - zero-byte messages;
//  - a named receive's Work reports its source too.
// "any-source-fails MODE" (rank 0 waits for any source and must fail):
//  - "mismatch": rank 1 sends 5 floats where rank 0 expects 4: MismatchError naming rank 1;
//  - "timeout": nobody sends: TimeoutError saying "recv from any source" and the tag;
//  - "direct-timeout": a receive from rank 1, which sends nothing: TimeoutError naming rank 1;
//  - "dead": the last rank is killed while rank 0 waits: PeerError naming it.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

using std::chrono::milliseconds;

int32_t value(int sender, int round, size_t i) { return sender * 100000 + round * 1000 + static_cast<int32_t>(i); }

void senders_in_changing_order(ProcessGroup& g, CheckLog& log) {
  const int n = g.size();
  const size_t count = 257;
  for (int round = 0; round < 3; ++round) {
    log.begin_case("every rank sends to rank 0, round " + std::to_string(round));
    SendOptions so;
    so.tag = 7;
    RecvOptions ro;
    ro.tag = 7;
    if (g.rank() != 0) {
      // Each round a different rank goes first.
      std::this_thread::sleep_for(milliseconds(40 * ((g.rank() + round) % (n - 1))));
      std::vector<int32_t> out(count);
      for (size_t i = 0; i < count; ++i) out[i] = value(g.rank(), round, i);
      g.send(Buffer(out.data(), count), 0, so)->wait();
    } else {
      std::vector<bool> seen(static_cast<size_t>(n), false);
      for (int k = 1; k < n; ++k) {
        std::vector<int32_t> in(count, -1);
        WorkPtr w = g.recv(Buffer(in.data(), count), kAnySource, ro);
        w->wait();
        const int src = w->source_rank();
        if (src < 1 || src >= n) {
          log.expect(false, "source_rank() is " + std::to_string(src));
          continue;
        }
        log.expect(!seen[static_cast<size_t>(src)], "rank " + std::to_string(src) + " was received from twice");
        seen[static_cast<size_t>(src)] = true;
        bool intact = true;
        for (size_t i = 0; i < count; ++i) intact = intact && in[i] == value(src, round, i);
        log.expect(intact, "the message said to come from rank " + std::to_string(src) + " holds other data");
      }
    }
    g.barrier()->wait();
  }
}

// Rank 1 sends one message with tag 3, rank 2 two; rank 0 receives any, from 2, any. Either the
// first any-source receive takes rank 1's message (then rank 2's come in order to the others)
// or rank 2's first (then the named receive gets rank 2's second, and the last one rank 1's).
void mixed_with_named_receives(ProcessGroup& g, CheckLog& log) {
  log.begin_case("any-source receives mixed with a named one on the same tag");
  SendOptions so;
  so.tag = 3;
  RecvOptions ro;
  ro.tag = 3;
  if (g.rank() == 1 || g.rank() == 2) {
    std::vector<int32_t> a(10, g.rank() * 10 + 1), b(10, g.rank() * 10 + 2);
    WorkPtr s1 = g.send(Buffer(a.data(), a.size()), 0, so);
    WorkPtr s2 = g.rank() == 2 ? g.send(Buffer(b.data(), b.size()), 0, so) : nullptr;
    s1->wait();
    if (s2) s2->wait();
  } else if (g.rank() == 0) {
    std::vector<int32_t> x(10), y(10), z(10);
    WorkPtr wx = g.recv(Buffer(x.data(), x.size()), kAnySource, ro);
    WorkPtr wy = g.recv(Buffer(y.data(), y.size()), 2, ro);
    WorkPtr wz = g.recv(Buffer(z.data(), z.size()), kAnySource, ro);
    wx->wait();
    wy->wait();
    wz->wait();
    log.expect(wy->source_rank() == 2, "a named receive's source_rank() is " + std::to_string(wy->source_rank()));
    const bool first_from_1 = wx->source_rank() == 1;
    log.expect(wx->source_rank() == 1 || wx->source_rank() == 2,
               "the first any-source receive came from rank " + std::to_string(wx->source_rank()));
    log.expect(wz->source_rank() == (first_from_1 ? 2 : 1),
               "the second any-source receive came from rank " + std::to_string(wz->source_rank()));
    auto all = [](const std::vector<int32_t>& v, int32_t want) { return std::all_of(v.begin(), v.end(), [&](int32_t e) { return e == want; }); };
    if (first_from_1) {
      log.expect(all(x, 11) && all(y, 21) && all(z, 22), "data out of order (rank 1 first)");
    } else {
      log.expect(all(x, 21) && all(y, 22) && all(z, 11), "data out of order (rank 2 first)");
    }
  }
  g.barrier()->wait();
}

// 3+ ranks. The last rank sends tag 4 at once and enters a barrier (its barrier message to rank
// 0 may follow); the ranks between enter the barrier at once; rank 1 sends tag 5 after 200 ms.
// Rank 0 asks for tag 5 first: the tag-4 message and the barrier's messages at the heads of
// their pairs are no candidates and must stay for their own receives. (Behind a message of
// another tag on the same pair, a message is out of reach: pairs match strictly in order.)
void other_messages_at_the_head(ProcessGroup& g, CheckLog& log) {
  log.begin_case("another tag and a collective's message at the head of a pair");
  const int last = g.size() - 1;
  std::vector<int32_t> four(6, 4), five(6, 5), got4(6, 0), got5(6, 0);
  SendOptions s4, s5;
  s4.tag = 4;
  s5.tag = 5;
  RecvOptions r4, r5;
  r4.tag = 4;
  r5.tag = 5;
  if (g.rank() == 0) {
    WorkPtr w5 = g.recv(Buffer(got5.data(), got5.size()), kAnySource, r5);
    w5->wait();
    log.expect(w5->source_rank() == 1, "tag 5 came from rank " + std::to_string(w5->source_rank()));
    log.expect(got5 == five, "tag 5's data");
    WorkPtr w4 = g.recv(Buffer(got4.data(), got4.size()), kAnySource, r4);
    w4->wait();
    log.expect(w4->source_rank() == last, "tag 4 came from rank " + std::to_string(w4->source_rank()));
    log.expect(got4 == four, "tag 4's data");
    g.barrier()->wait();
  } else {
    if (g.rank() == last) g.send(Buffer(four.data(), four.size()), 0, s4)->wait();
    if (g.rank() == 1) {
      std::this_thread::sleep_for(milliseconds(200));
      g.send(Buffer(five.data(), five.size()), 0, s5)->wait();
    }
    g.barrier()->wait();
  }
}

void zero_bytes(ProcessGroup& g, CheckLog& log) {
  log.begin_case("zero-byte messages from any source");
  SendOptions so;
  so.tag = 9;
  RecvOptions ro;
  ro.tag = 9;
  int32_t none = 0;  // a pointer with no elements behind it
  if (g.rank() != 0) {
    g.send(Buffer(&none, 0), 0, so)->wait();
  } else {
    std::vector<int> sources;
    for (int k = 1; k < g.size(); ++k) {
      WorkPtr w = g.recv(Buffer(&none, 0), kAnySource, ro);
      w->wait();
      sources.push_back(w->source_rank());
    }
    std::sort(sources.begin(), sources.end());
    std::vector<int> want;
    for (int k = 1; k < g.size(); ++k) want.push_back(k);
    log.expect(sources == want, "the zero-byte messages did not come once from every other rank");
  }
  g.barrier()->wait();
}

}  // namespace

void scenario_any_source(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  senders_in_changing_order(g, ctx.log);
  if (g.size() >= 3) mixed_with_named_receives(g, ctx.log);
  if (g.size() >= 3) other_messages_at_the_head(g, ctx.log);
  zero_bytes(g, ctx.log);
  ctx.log.end_case();
}

void scenario_any_source_fails(WorkerContext& ctx) {
  const std::string mode = ctx.args.empty() ? "" : ctx.args[0];
  ProcessGroup& g = ctx.join();
  ctx.log.begin_case("any-source receive that fails: " + mode);
  RecvOptions ro;
  ro.tag = 11;
  if (mode == "timeout" || mode == "direct-timeout") ro.timeout = milliseconds(1500);
  if (g.rank() == 0) {
    std::vector<float> buf(4);
    // direct-timeout: a receive from rank 1, which sends nothing (its deadline is set by the
    // first look at the clock while it is in flight: Executor::check_pending).
    const int from = mode == "direct-timeout" ? 1 : kAnySource;
    g.recv(Buffer(buf.data(), buf.size()), from, ro)->wait();  // throws: main() prints it
    ctx.log.expect(false, "the receive succeeded");
    return;
  }
  if (mode == "mismatch" && g.rank() == 1) {
    std::vector<float> five(5, 1.0f);
    SendOptions so;
    so.tag = 11;
    g.send(Buffer(five.data(), five.size()), 0, so)->wait();
  }
  if (mode == "dead" && g.rank() == g.size() - 1) {
    std::this_thread::sleep_for(milliseconds(300));
    ::kill(::getpid(), SIGKILL);
  }
  // The others stay until rank 0 has failed; its abort (or the timeout's) ends them too.
  std::this_thread::sleep_for(milliseconds(mode == "timeout" || mode == "direct-timeout" ? 4000 : 1500));
  ctx.group->abort("any-source-fails scenario done");
  ctx.group.reset();
}

}  // namespace kolo::coltest

// Scenario "direct" (any world size): the direct path (KOLO_DIRECT; Executor::run_direct), which
// runs a small collective on its issuing thread while the group is idle, gives the same results
// as the engine, also when it hands a collective over. The driver (test_direct.cpp) launches it
// with every rank direct, and with direct and engine-only ranks mixed (the messages on the wire
// must be the same either way).
//  - every collective but alltoallv, at the counts the direct path takes (1, world*3+1, 1000,
//    and 2048 float32: its 8 KiB limit) and one above it, in place and out of place, roots 0 and
//    last, every op on float32 and a few dtypes; each case checked element by element;
//  - the same cases with one rank (a different one each case) issuing 3 ms late, longer than
//    KOLO_DIRECT_SPIN_US: the others hand their collective over to the engine;
//  - collectives handed over (one rank 1 ms late) whose callers wait only once the message is
//    there: the waiting caller runs them directly after all, skipping what the first attempt sent,
//    and runs the completion callback registered meanwhile;
//  - 300 back-to-back broadcasts from rank 0 without waiting, then all waited and checked: the
//    root fills its rings (direct sends meet full rings) while the others fall behind;
//  - two threads per rank issue all-reduces and broadcasts by turns (a turnstile fixes the order,
//    the same on every rank) and each waits for its own while the other issues: a collective may
//    run directly on one thread while the other waits for its last one, or queues behind it;
//  - sends and receives around the ring (a direct send completes at issue, a receive whose
//    message is there already completes at issue), half the ranks receiving first;
//  - 200 sends and 200 receives issued back to back (more than a ring holds), waited for at the
//    end: sends pass queued receives, never queued sends;
//  - receives waited for while their messages are on the way (sent at once, within the direct
//    spin, or far later), two per peer, the second queued behind the first;
//  - issuing never waits for a peer: rank 0 issues a receive, and an all-reduce, whose peers
//    issue their side only after a token that rank 0 sends on a second group after both calls
//    returned (were either call to wait for its peer, both ranks would wait for ever);
//  - a root's 8-byte broadcast, after a barrier, has completed when broadcast() returns
//    (printed, for the driver to check where the direct path is on).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "matrix_run.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

std::vector<MatrixCase> direct_cases(int world) {
  std::vector<MatrixCase> cases;
  const std::vector<size_t> counts{1, static_cast<size_t>(world * 3 + 1), 1000, 2048, 2049};
  const Coll colls[] = {Coll::broadcast, Coll::allreduce, Coll::reduce,         Coll::allgather, Coll::gather,
                        Coll::scatter,   Coll::alltoall,  Coll::reduce_scatter, Coll::barrier};
  for (Coll coll : colls) {
    const bool reduction = coll == Coll::allreduce || coll == Coll::reduce || coll == Coll::reduce_scatter;
    const bool rooted = coll == Coll::broadcast || coll == Coll::reduce || coll == Coll::gather || coll == Coll::scatter;
    for (size_t count : counts) {
      for (int in_place = 0; in_place < 2; ++in_place) {
        if (in_place && (coll == Coll::broadcast || coll == Coll::barrier)) continue;
        for (int root : {0, world - 1}) {
          if (!rooted && root != 0) continue;
          MatrixCase c;
          c.coll = coll;
          c.count = coll == Coll::barrier ? 0 : count;
          c.in_place = in_place != 0;
          c.root = root;
          if (reduction) {
            for (ReduceKind op : {ReduceKind::sum, ReduceKind::max, ReduceKind::avg, ReduceKind::premul_sum}) {
              c.op = op;
              cases.push_back(c);
            }
            c.op = ReduceKind::sum;
            for (DataType t : {DataType::int8, DataType::float64, DataType::bfloat16}) {
              c.dtype = t;
              cases.push_back(c);
            }
            c.dtype = DataType::float32;
          } else {
            for (DataType t : {DataType::float32, DataType::uint8, DataType::int64}) {
              c.dtype = t;
              cases.push_back(c);
            }
          }
          if (coll == Coll::barrier) break;
        }
        if (coll == Coll::barrier) break;
      }
      if (coll == Coll::barrier) break;
    }
  }
  return cases;
}

}  // namespace

void scenario_direct(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  const int world = g.size(), rank = g.rank();
  const std::vector<MatrixCase> cases = direct_cases(world);
  uint32_t salt = 0;
  for (int late = 0; late < 2; ++late) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const MatrixCase& c = cases[k];
      ctx.log.begin_case(std::string(late ? "one rank late: " : "") + c.describe());
      if (late && static_cast<int>(k % static_cast<size_t>(world)) == rank)
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      run_matrix_case(g, c, ++salt, ctx.log);
    }
  }

  ctx.log.begin_case("collectives handed over, waited for once their late messages came");
  if (world > 1) {
    // One rank (a different one each round) issues 1 ms late; the others' direct attempts hand
    // over after KOLO_DIRECT_SPIN_US, and they wait only 4 ms later, when the message is there:
    // the waiting caller then runs the collective directly after all, skipping the sends its
    // first attempt made (sent twice, the next round's messages would not match).
    const size_t n = 3, w = static_cast<size_t>(world);
    auto value = [](int r, size_t i) { return r * 1000 + static_cast<int32_t>(i); };
    for (int round = 0; round < 4 * world; ++round) {
      const int late = round % world, root = (round / world) % world;
      const Coll kinds[] = {Coll::allreduce, Coll::broadcast, Coll::reduce, Coll::allgather,
                            Coll::gather,    Coll::scatter,   Coll::alltoall, Coll::reduce_scatter};
      for (Coll kind : kinds) {
        std::vector<int32_t> in(n * w), out(n * w, -1);
        for (size_t i = 0; i < in.size(); ++i) in[i] = value(rank, i);
        if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        WorkPtr wk;
        switch (kind) {
          case Coll::allreduce: wk = g.allreduce(Buffer(in.data(), n), Buffer(out.data(), n)); break;
          case Coll::broadcast: {
            BroadcastOptions o;
            o.root = root;
            if (rank == root) std::copy(in.begin(), in.begin() + n, out.begin());
            wk = g.broadcast(Buffer(out.data(), n), o);
            break;
          }
          case Coll::reduce: {
            ReduceOptions o;
            o.root = root;
            wk = g.reduce(Buffer(in.data(), n), Buffer(out.data(), n), o);
            break;
          }
          case Coll::allgather: wk = g.allgather(Buffer(in.data(), n), Buffer(out.data(), n * w)); break;
          case Coll::gather: {
            GatherOptions o;
            o.root = root;
            wk = g.gather(Buffer(in.data(), n), Buffer(out.data(), rank == root ? n * w : 0), o);
            break;
          }
          case Coll::scatter: {
            ScatterOptions o;
            o.root = root;
            wk = g.scatter(Buffer(in.data(), rank == root ? n * w : 0), Buffer(out.data(), n), o);
            break;
          }
          case Coll::alltoall: wk = g.alltoall(Buffer(in.data(), n * w), Buffer(out.data(), n * w)); break;
          default: wk = g.reduce_scatter(Buffer(in.data(), n * w), Buffer(out.data(), n)); break;
        }
        // A callback registered while the collective is handed over (the caller has its Work):
        // whoever completes it, the waiting caller's direct run included, must run it before
        // wait() returns.
        std::atomic<int> callbacks{0};
        wk->on_complete([&callbacks](Work&) { callbacks.fetch_add(1); });
        if (rank != late) std::this_thread::sleep_for(std::chrono::milliseconds(4));
        wk->wait();
        const std::string what = std::string(coll_name(kind)) + ", rank " + std::to_string(late) + " late";
        ctx.log.expect(callbacks.load() == 1, what + ": the completion callback ran " + std::to_string(callbacks.load()) +
                                                  " times before wait() returned, not once");
        const long double sum_ranks = static_cast<long double>(world) * (world - 1) / 2;
        switch (kind) {
          case Coll::allreduce:
            ctx.log.expect_elements(what.c_str(), DataType::int32, out.data(), n,
                                    [&](size_t i) { return sum_ranks * 1000 + static_cast<long double>(world * i); });
            break;
          case Coll::broadcast:
            ctx.log.expect_elements(what.c_str(), DataType::int32, out.data(), n, [&](size_t i) { return value(root, i); });
            break;
          case Coll::reduce:
            if (rank == root)
              ctx.log.expect_elements(what.c_str(), DataType::int32, out.data(), n,
                                      [&](size_t i) { return sum_ranks * 1000 + static_cast<long double>(world * i); });
            break;
          case Coll::allgather:
            ctx.log.expect_elements(what.c_str(), DataType::int32, out.data(), n * w,
                                    [&](size_t i) { return value(static_cast<int>(i / n), i % n); });
            break;
          case Coll::gather:
            if (rank == root)
              ctx.log.expect_elements(what.c_str(), DataType::int32, out.data(), n * w,
                                      [&](size_t i) { return value(static_cast<int>(i / n), i % n); });
            break;
          case Coll::scatter:
            ctx.log.expect_elements(what.c_str(), DataType::int32, out.data(), n,
                                    [&](size_t i) { return value(root, static_cast<size_t>(rank) * n + i); });
            break;
          case Coll::alltoall:  // block j of rank r's output is block r of rank j's input
            ctx.log.expect_elements(what.c_str(), DataType::int32, out.data(), n * w, [&](size_t i) {
              return value(static_cast<int>(i / n), static_cast<size_t>(rank) * n + i % n);
            });
            break;
          default:
            ctx.log.expect_elements(what.c_str(), DataType::int32, out.data(), n, [&](size_t i) {
              return sum_ranks * 1000 + static_cast<long double>(world * (static_cast<size_t>(rank) * n + i));
            });
            break;
        }
      }
    }
  }

  ctx.log.begin_case("300 broadcasts issued back to back, waited for at the end");
  {
    constexpr int kCalls = 300;
    constexpr size_t kCount = 17;
    std::vector<std::vector<int32_t>> bufs(kCalls, std::vector<int32_t>(kCount, -1));
    std::vector<WorkPtr> works;
    for (int j = 0; j < kCalls; ++j) {
      if (rank == 0)
        for (size_t i = 0; i < kCount; ++i) bufs[static_cast<size_t>(j)][i] = j * 1000 + static_cast<int32_t>(i);
      works.push_back(g.broadcast(Buffer(bufs[static_cast<size_t>(j)].data(), kCount)));
    }
    for (int j = 0; j < kCalls; ++j) {
      works[static_cast<size_t>(j)]->wait();
      ctx.log.expect_elements("back-to-back broadcast", DataType::int32, bufs[static_cast<size_t>(j)].data(), kCount,
                              [&](size_t i) { return static_cast<long double>(j * 1000 + static_cast<int>(i)); });
    }
  }

  ctx.log.begin_case("two threads issuing by turns, each waiting for its own");
  {
    constexpr int kTurns = 200;
    std::mutex mu;
    std::condition_variable cv;
    int turn = 0;
    std::vector<std::vector<int32_t>> bufs(kTurns, std::vector<int32_t>(5));
    std::vector<char> ok(kTurns, 0);
    auto worker = [&](int parity) {
      for (int k = parity; k < kTurns; k += 2) {
        std::vector<int32_t>& b = bufs[static_cast<size_t>(k)];
        for (size_t i = 0; i < b.size(); ++i) b[i] = (rank + 1) * (k + 1) + static_cast<int32_t>(i);
        WorkPtr w;
        {
          std::unique_lock<std::mutex> lk(mu);
          cv.wait(lk, [&] { return turn == k; });
          if (k % 3 == 0) {
            BroadcastOptions o;
            o.root = k % world;
            w = g.broadcast(Buffer(b.data(), b.size()), o);
          } else {
            w = g.allreduce(Buffer(b.data(), b.size()));
          }
          ++turn;
        }
        cv.notify_all();
        w->wait();
        bool good = true;
        for (size_t i = 0; i < b.size(); ++i) {
          long double want = 0;
          if (k % 3 == 0) {
            want = static_cast<long double>((k % world + 1) * (k + 1) + static_cast<int>(i));
          } else {
            for (int r = 0; r < world; ++r) want += (r + 1) * (k + 1) + static_cast<int>(i);
          }
          good = good && static_cast<long double>(b[i]) == want;
        }
        ok[static_cast<size_t>(k)] = good ? 1 : 0;
      }
    };
    std::thread t0(worker, 0), t1(worker, 1);
    t0.join();
    t1.join();
    for (int k = 0; k < kTurns; ++k)
      ctx.log.expect(ok[static_cast<size_t>(k)] != 0, "turn " + std::to_string(k) + " has the right result");
  }

  ctx.log.begin_case("sends and receives around the ring");
  if (world > 1) {
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    for (int k = 0; k < 100; ++k) {
      const size_t n = 1 + static_cast<size_t>(k % 7) * 100;
      std::vector<int32_t> out(n), in(n, -1);
      for (size_t i = 0; i < n; ++i) out[i] = rank * 100000 + k * 1000 + static_cast<int32_t>(i % 1000);
      WorkPtr s, r;
      if ((rank + k) % 2 == 0) {
        s = g.send(Buffer(out.data(), n), next);
        r = g.recv(Buffer(in.data(), n), prev);
      } else {
        r = g.recv(Buffer(in.data(), n), prev);
        s = g.send(Buffer(out.data(), n), next);
      }
      s->wait();
      r->wait();
      ctx.log.expect_elements("received from the previous rank", DataType::int32, in.data(), n,
                              [&](size_t i) { return static_cast<long double>(prev * 100000 + k * 1000 + static_cast<int>(i % 1000)); });
    }
  }

  ctx.log.begin_case("sends and receives issued back to back, waited for at the end");
  if (world > 1) {
    // 200 of each, more than a ring holds (its later sends queue behind full rings), receives
    // issued first on even steps and sends first on odd ones: a send passes queued receives at
    // issue, never a queued send; every message arrives in order.
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    constexpr int kSteps = 200;
    constexpr size_t kCount = 5;
    std::vector<std::vector<int32_t>> out(kSteps, std::vector<int32_t>(kCount)), in(kSteps, std::vector<int32_t>(kCount, -1));
    std::vector<WorkPtr> works;
    for (int k = 0; k < kSteps; ++k) {
      auto& o = out[static_cast<size_t>(k)];
      for (size_t i = 0; i < kCount; ++i) o[i] = rank * 100000 + k * 10 + static_cast<int32_t>(i);
      auto recv = [&] { works.push_back(g.recv(Buffer(in[static_cast<size_t>(k)].data(), kCount), prev)); };
      auto send = [&] { works.push_back(g.send(Buffer(o.data(), kCount), next)); };
      if (k % 2 == 0) {
        recv();
        send();
      } else {
        send();
        recv();
      }
    }
    for (const WorkPtr& w : works) w->wait();
    for (int k = 0; k < kSteps; ++k)
      ctx.log.expect_elements("message in order from the previous rank", DataType::int32, in[static_cast<size_t>(k)].data(),
                              kCount, [&](size_t i) { return static_cast<long double>(prev * 100000 + k * 10 + static_cast<int>(i)); });
  }

  ctx.log.begin_case("receives waited for while their messages are on the way");
  if (world > 1) {
    // Each rank issues two receives, then sends its two messages after a pause: none, shorter
    // than KOLO_DIRECT_SPIN_US (the waiter polls the pair and takes the first), or far longer
    // (it posts the receive and the engine's polling delivers it). The second receive is queued
    // behind the first, so it is waited for the ordinary way.
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    const std::chrono::microseconds pauses[] = {std::chrono::microseconds(0), std::chrono::microseconds(5),
                                                std::chrono::microseconds(3000)};
    for (int k = 0; k < 30; ++k) {
      const size_t n = 1 + static_cast<size_t>(k % 5) * 3;
      std::vector<int32_t> out1(n), out2(n), in1(n, -1), in2(n, -1);
      for (size_t i = 0; i < n; ++i) {
        out1[i] = rank * 100000 + k * 100 + static_cast<int32_t>(i);
        out2[i] = -out1[i] - 1;
      }
      WorkPtr r1 = g.recv(Buffer(in1.data(), n), prev);
      WorkPtr r2 = g.recv(Buffer(in2.data(), n), prev);
      std::thread sender([&] {
        std::this_thread::sleep_for(pauses[k % 3]);
        try {
          g.send(Buffer(out1.data(), n), next)->wait();
          g.send(Buffer(out2.data(), n), next)->wait();
        } catch (const std::exception& e) {
          ctx.log.expect(false, std::string("the sends went out: ") + e.what());
        }
      });
      try {
        r1->wait();
        r2->wait();
      } catch (...) {
        sender.join();  // its own wait ends too (the group has failed), and a joinable thread
        throw;          // must not be destroyed: the error would become std::terminate
      }
      sender.join();
      ctx.log.expect_elements("first message from the previous rank", DataType::int32, in1.data(), n,
                              [&](size_t i) { return static_cast<long double>(prev * 100000 + k * 100 + static_cast<int>(i)); });
      ctx.log.expect_elements("second message from the previous rank", DataType::int32, in2.data(), n,
                              [&](size_t i) { return -static_cast<long double>(prev * 100000 + k * 100 + static_cast<int>(i)) - 1; });
    }
  }

  ctx.log.begin_case("issuing never waits for a peer");
  if (world > 1) {
    std::shared_ptr<ProcessGroup> side = g.split(0, rank);  // its own connections: the tokens
    int32_t token = 7, data = rank == 1 ? 99 : -1;
    std::vector<int32_t> v(3, rank + 1);
    if (rank == 0) {
      WorkPtr r = g.recv(Buffer(&data, 1), 1);  // rank 1 sends it only after the token
      WorkPtr a = g.allreduce(Buffer(v.data(), v.size()));  // the others issue it after the token too
      for (int p = 1; p < world; ++p) side->send(Buffer(&token, 1), p)->wait();
      r->wait();
      a->wait();
      ctx.log.expect(data == 99, "the receive issued before its message was sent got it");
    } else {
      int32_t got = 0;
      side->recv(Buffer(&got, 1), 0)->wait();
      ctx.log.expect(got == 7, "the token arrived");
      if (rank == 1) g.send(Buffer(&data, 1), 0)->wait();
      g.allreduce(Buffer(v.data(), v.size()))->wait();
    }
    side->shutdown();
    const long double sum = static_cast<long double>(world) * (world + 1) / 2;
    ctx.log.expect_elements("all-reduce issued before its peers'", DataType::int32, v.data(), v.size(), [&](size_t) { return sum; });
  }

  ctx.log.begin_case("a root's small broadcast after a barrier");
  {
    g.barrier()->wait();
    double x = rank == 0 ? 42.5 : 0;
    WorkPtr w = g.broadcast(Buffer(&x, 1));
    const bool done_at_issue = w->is_completed();
    w->wait();
    ctx.log.expect(x == 42.5, "the broadcast value arrived");
    if (rank == 0) ctx.say(std::string("ROOT BROADCAST COMPLETE AT ISSUE: ") + (done_at_issue ? "yes" : "no"));
  }
  ctx.log.end_case();
}

}  // namespace kolo::coltest

namespace kolo::coltest {

// Scenario "direct-order" (2 ranks; the driver sets KOLO_SHM_SLOTS=8 and an inline window of
// 10 s, so that operations queued on rank 0 stay queued until it waits): rank 0 issues 12 sends
// without waiting, 8 fill the ring and 4 queue; rank 1 takes 3 (a token on a second group says
// when, another says done); rank 0's 13th send then finds room in the ring but must not pass the
// 4 queued sends. Rank 1 checks that all 13 arrive in order.
void scenario_direct_order(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  const int rank = g.rank();
  constexpr int kSlots = 8, kQueued = 4, kTaken = 3, kSends = kSlots + kQueued + 1;
  std::shared_ptr<ProcessGroup> side = g.split(0, rank);  // its own connections: the tokens
  int32_t token = 1;
  if (rank == 0) {
    std::vector<int32_t> vals(kSends);
    for (int i = 0; i < kSends; ++i) vals[static_cast<size_t>(i)] = 7 * i + 1;
    std::vector<WorkPtr> works;
    for (int i = 0; i < kSlots + kQueued; ++i) works.push_back(g.send(Buffer(&vals[static_cast<size_t>(i)], 1), 1));
    side->send(Buffer(&token, 1), 1)->wait();
    side->recv(Buffer(&token, 1), 1)->wait();
    works.push_back(g.send(Buffer(&vals[kSends - 1], 1), 1));  // room in the ring now
    for (const WorkPtr& w : works) w->wait();
  } else if (rank == 1) {
    std::vector<int32_t> got(kSends, -1);
    side->recv(Buffer(&token, 1), 0)->wait();
    for (int i = 0; i < kTaken; ++i) g.recv(Buffer(&got[static_cast<size_t>(i)], 1), 0)->wait();
    side->send(Buffer(&token, 1), 0)->wait();
    for (int i = kTaken; i < kSends; ++i) g.recv(Buffer(&got[static_cast<size_t>(i)], 1), 0)->wait();
    ctx.log.begin_case("sends arrive in issue order");
    ctx.log.expect_elements("message", DataType::int32, got.data(), got.size(),
                            [](size_t i) { return static_cast<long double>(7 * i + 1); });
  }
  side->shutdown();
  ctx.log.end_case();
}

}  // namespace kolo::coltest

namespace kolo::coltest {

// Scenario "direct-forward" (4 ranks; the driver forces the trees for gather and scatter, shrinks
// the ring slots and makes the direct spin longer than the test may take): a tree forwards
// several ranks' blocks in one message, longer than a slot, which recv_now can never take; a
// direct attempt must post that receive at once instead of holding it through the spin. Every
// element is checked against the rank that owns it.
void scenario_direct_forward(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  const int rank = g.rank(), world = g.size();
  constexpr size_t n = 200;  // int32 per rank: 800 B fits a 1 KiB slot; two blocks do not
  for (int round = 0; round < 3; ++round) {
    for (int root = 0; root < world; ++root) {
      g.barrier()->wait();  // the group is idle: the collective below is run directly
      const std::string at_root = ", root " + std::to_string(root);
      ctx.log.begin_case(("gather through the tree" + at_root).c_str());
      std::vector<int32_t> in(n), out(rank == root ? n * static_cast<size_t>(world) : 0, -1);
      for (size_t i = 0; i < n; ++i) in[i] = static_cast<int32_t>(rank * 100000 + round * 1000 + static_cast<int>(i));
      GatherOptions go;
      go.root = root;
      g.gather(Buffer(in.data(), n), Buffer(out.data(), out.size()), go)->wait();
      if (rank == root)
        ctx.log.expect_elements("gathered", DataType::int32, out.data(), out.size(), [&](size_t i) {
          return static_cast<long double>(static_cast<int>(i / n) * 100000 + round * 1000 + static_cast<int>(i % n));
        });
      ctx.log.end_case();
      g.barrier()->wait();
      ctx.log.begin_case(("scatter through the tree" + at_root).c_str());
      std::vector<int32_t> all(rank == root ? n * static_cast<size_t>(world) : 0), mine(n, -1);
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(round * 7 + 3 * static_cast<int>(i));
      ScatterOptions so;
      so.root = root;
      g.scatter(Buffer(all.data(), all.size()), Buffer(mine.data(), n), so)->wait();
      ctx.log.expect_elements("scattered", DataType::int32, mine.data(), n, [&](size_t i) {
        return static_cast<long double>(round * 7 + 3 * static_cast<int>(static_cast<size_t>(rank) * n + i));
      });
      ctx.log.end_case();
    }
  }
}

}  // namespace kolo::coltest

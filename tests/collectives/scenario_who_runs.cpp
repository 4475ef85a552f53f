// Scenario "who-runs" (any world size): whichever thread ends up running a collective (the
// caller inside wait(), or the group's engine thread), the results, the order and progress are
// the same (see "Who runs an operation" in src/engine/executor.hpp):
//  - after waited collectives (callers that wait at once), a collective nobody waits for still
//    completes on its own: its callback has run after 500 ms without wait() or is_completed();
//  - three collectives issued back to back and only the last one waited for all complete, in
//    issue order, with the right results;
//  - an Options.overlap collective polled with is_completed() completes;
//  - collectives of count 0 complete at issue, except behind one not yet run: after it;
//  - a long run of issue-then-wait allreduces gives the right result every time;
//  - sends and receives, which a waiting caller also runs itself: every rank sends to the next
//    and receives from the previous, waiting for its send first, at a size the shared-memory
//    transport hands over only when the receiver reads it (the waiter must post the receive
//    issued after the send it waits for, or both ranks wait forever); and a receive waited for
//    on one thread while another thread issues the send that the peer needs first.
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

using Clock = std::chrono::steady_clock;

// Element i of rank r's input; the sum over ranks is known in closed form.
int32_t input(int r, size_t i, int salt) { return static_cast<int32_t>((r + 1) * 1000 + static_cast<int>(i % 97) + salt); }
long double sum_over_ranks(int world, size_t i, int salt) {
  long double s = 0;
  for (int r = 0; r < world; ++r) s += input(r, i, salt);
  return s;
}

std::vector<int32_t> make_input(int rank, size_t n, int salt) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(rank, i, salt);
  return v;
}

void unwaited_collective_progresses(ProcessGroup& g, CheckLog& log) {
  log.begin_case("a collective nobody waits for completes on its own");
  const int world = g.size();
  for (int i = 0; i < 20; ++i) {  // callers that wait at once: later collectives may be deferred
    auto v = make_input(g.rank(), 33, i);
    g.allreduce(Buffer(v.data(), v.size()))->wait();
    log.expect_elements("waited allreduce", DataType::int32, v.data(), v.size(), [&](size_t k) { return sum_over_ranks(world, k, i); });
  }
  auto v = make_input(g.rank(), 1001, 7);
  std::atomic<bool> done{false};
  WorkPtr w = g.allreduce(Buffer(v.data(), v.size()));
  w->on_complete([&](Work&) { done = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  log.expect(done.load(), "an allreduce nobody waited for had not completed after 500 ms");
  w->wait();
  log.expect_elements("unwaited allreduce", DataType::int32, v.data(), v.size(), [&](size_t k) { return sum_over_ranks(world, k, 7); });
}

void back_to_back_then_wait_last(ProcessGroup& g, CheckLog& log) {
  log.begin_case("three collectives issued back to back, only the last waited for");
  const int world = g.size();
  std::vector<std::vector<int32_t>> bufs;
  for (int j = 0; j < 3; ++j) bufs.push_back(make_input(g.rank(), 257 + static_cast<size_t>(j), 100 + j));
  std::vector<WorkPtr> works;
  std::vector<int> order;
  std::mutex order_mu;
  for (int j = 0; j < 3; ++j) {
    works.push_back(g.allreduce(Buffer(bufs[static_cast<size_t>(j)].data(), bufs[static_cast<size_t>(j)].size())));
    works.back()->on_complete([&, j](Work&) {
      std::lock_guard<std::mutex> lk(order_mu);
      order.push_back(j);
    });
  }
  works[2]->wait();
  for (int j = 0; j < 3; ++j) {
    log.expect(works[static_cast<size_t>(j)]->is_completed(), "collective " + std::to_string(j) + " is not complete after the last one");
    log.expect_elements("allreduce", DataType::int32, bufs[static_cast<size_t>(j)].data(), bufs[static_cast<size_t>(j)].size(),
                        [&](size_t k) { return sum_over_ranks(world, k, 100 + j); });
  }
  std::lock_guard<std::mutex> lk(order_mu);
  log.expect(order == std::vector<int>({0, 1, 2}), "callbacks did not run in issue order");
}

void overlap_option_polled(ProcessGroup& g, CheckLog& log) {
  log.begin_case("an Options.overlap collective polled with is_completed()");
  const int world = g.size();
  auto v = make_input(g.rank(), 4099, 55);
  AllreduceOptions o;
  o.overlap = true;
  WorkPtr w = g.allreduce(Buffer(v.data(), v.size()), o);
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (!w->is_completed() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::microseconds(100));
  log.expect(w->is_completed(), "an overlap allreduce polled with is_completed() did not complete within 20 s");
  w->wait();
  log.expect_elements("overlap allreduce", DataType::int32, v.data(), v.size(), [&](size_t k) { return sum_over_ranks(world, k, 55); });
}

// Collectives of count 0 move nothing: with every earlier collective complete, each completes
// at issue (no queue, no message); behind one still queued, it completes after it, in order.
void collectives_of_count_zero(ProcessGroup& g, CheckLog& log) {
  log.begin_case("collectives of count 0 complete at issue, and after what was issued before them");
  const int world = g.size();
  int32_t none = 0;  // a valid address for buffers of 0 elements
  const Buffer empty(&none, 0);
  const std::vector<std::pair<const char*, std::function<WorkPtr()>>> kinds = {
      {"allreduce", [&] { return g.allreduce(empty); }},
      {"broadcast", [&] { return g.broadcast(empty); }},
      {"reduce", [&] { return g.reduce(empty, empty); }},
      {"allgather", [&] { return g.allgather(empty, empty); }},
      {"gather", [&] { return g.gather(empty, empty); }},
      {"scatter", [&] { return g.scatter(empty, empty); }},
      {"reduce_scatter", [&] { return g.reduce_scatter(empty, empty); }},
      {"alltoall", [&] { return g.alltoall(empty, empty); }},
  };
  for (const auto& [name, issue] : kinds) {
    WorkPtr w = issue();
    log.expect(w->is_completed() && w->is_success(), std::string(name) + " of count 0 was not complete at issue");
    w->wait();
  }
  // Behind a collective that has not run yet (deferred to its waiter, or queued for the engine
  // thread): the empty one must not complete first.
  auto v = make_input(g.rank(), 4097, 77);
  WorkPtr before = g.allreduce(Buffer(v.data(), v.size()));
  WorkPtr after = g.allreduce(empty);
  log.expect(!after->is_completed() || before->is_completed(), "an allreduce of count 0 completed before the allreduce issued ahead of it");
  after->wait();
  log.expect(before->is_completed(), "the allreduce issued before one of count 0 was not complete when that one was");
  before->wait();
  log.expect_elements("allreduce before one of count 0", DataType::int32, v.data(), v.size(),
                      [&](size_t k) { return sum_over_ranks(world, k, 77); });
  // And the group goes on with its sequence numbers in step on every rank.
  auto u = make_input(g.rank(), 5, 78);
  g.allreduce(Buffer(u.data(), u.size()))->wait();
  log.expect_elements("allreduce after those of count 0", DataType::int32, u.data(), u.size(), [&](size_t k) { return sum_over_ranks(world, k, 78); });
}

void many_issue_then_wait(ProcessGroup& g, CheckLog& log) {
  log.begin_case("2000 issue-then-wait allreduces");
  const int world = g.size();
  std::vector<int32_t> v(3);
  size_t wrong = 0;
  for (int i = 0; i < 2000; ++i) {
    for (size_t k = 0; k < v.size(); ++k) v[k] = input(g.rank(), k, i);
    g.allreduce(Buffer(v.data(), v.size()))->wait();
    for (size_t k = 0; k < v.size(); ++k) wrong += static_cast<long double>(v[k]) != sum_over_ranks(world, k, i);
  }
  log.expect(wrong == 0, std::to_string(wrong) + " wrong elements in 2000 issue-then-wait allreduces");
}

// A deadlock must fail the test rather than hang it: these operations carry a short timeout.
constexpr std::chrono::milliseconds kP2pTimeout{20000};
struct P2pOptions {
  SendOptions send;
  RecvOptions recv;
  P2pOptions() { send.timeout = recv.timeout = kP2pTimeout; }
};

void send_waited_before_receive(ProcessGroup& g, CheckLog& log, size_t count) {
  log.begin_case("send to the next rank waited for before the receive from the previous, " + std::to_string(count * 4) + " bytes");
  const int world = g.size(), me = g.rank();
  const int next = (me + 1) % world, prev = (me + world - 1) % world;
  for (int round = 0; round < 3; ++round) {
    auto out = make_input(me, count, 300 + round);
    std::vector<int32_t> in(count, -1);
    const P2pOptions o;
    WorkPtr s = g.send(Buffer(out.data(), out.size()), next, o.send);
    WorkPtr r = g.recv(Buffer(in.data(), in.size()), prev, o.recv);
    s->wait();
    r->wait();
    log.expect_elements("received", DataType::int32, in.data(), in.size(),
                        [&](size_t k) { return static_cast<long double>(input(prev, k, 300 + round)); });
  }
}

// Sends and receives are deferred for their waiting caller like collectives: one nobody waits
// for must still go out (the engine thread takes it within two windows).
void unwaited_send_is_delivered(ProcessGroup& g, CheckLog& log) {
  log.begin_case("a send nobody waits for is delivered");
  if (g.rank() > 1) return;
  const int peer = 1 - g.rank();
  const P2pOptions o;
  std::vector<int32_t> v(7);
  for (int i = 0; i < 20; ++i) {  // waited at once: later operations are deferred to their callers
    if (g.rank() == 0) {
      v = make_input(0, v.size(), i);
      g.send(Buffer(v.data(), v.size()), peer, o.send)->wait();
    } else {
      g.recv(Buffer(v.data(), v.size()), peer, o.recv)->wait();
    }
  }
  if (g.rank() == 0) {
    v = make_input(0, v.size(), 99);
    std::atomic<bool> done{false};
    WorkPtr w = g.send(Buffer(v.data(), v.size()), peer, o.send);
    w->on_complete([&](Work&) { done = true; });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    log.expect(done.load(), "a send nobody waited for had not completed after 500 ms");
    w->wait();
  } else {
    std::vector<int32_t> in(v.size(), -1);
    g.recv(Buffer(in.data(), in.size()), peer, o.recv)->wait();
    log.expect_elements("received", DataType::int32, in.data(), in.size(),
                        [&](size_t k) { return static_cast<long double>(input(0, k, 99)); });
  }
}

void receive_waited_while_another_thread_sends(ProcessGroup& g, CheckLog& log) {
  log.begin_case("a receive waited on one thread while another issues the send its peer needs first");
  if (g.rank() > 1) return;
  const int peer = 1 - g.rank();
  const P2pOptions o;
  auto out = make_input(g.rank(), 515, 400);
  std::vector<int32_t> in(515, -1);
  if (g.rank() == 0) {
    // The receive waits on its own thread; the send that rank 1 waits for before it answers is
    // issued afterwards, on this thread.
    std::exception_ptr err;
    std::thread receiver([&] {
      try {
        g.recv(Buffer(in.data(), in.size()), peer, o.recv)->wait();
      } catch (...) {
        err = std::current_exception();
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    g.send(Buffer(out.data(), out.size()), peer, o.send)->wait();
    receiver.join();
    if (err) std::rethrow_exception(err);
  } else {
    g.recv(Buffer(in.data(), in.size()), peer, o.recv)->wait();
    g.send(Buffer(out.data(), out.size()), peer, o.send)->wait();
  }
  log.expect_elements("received", DataType::int32, in.data(), in.size(),
                      [&](size_t k) { return static_cast<long double>(input(peer, k, 400)); });
}

}  // namespace

void scenario_who_runs(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  unwaited_collective_progresses(g, ctx.log);
  back_to_back_then_wait_last(g, ctx.log);
  overlap_option_polled(g, ctx.log);
  collectives_of_count_zero(g, ctx.log);
  many_issue_then_wait(g, ctx.log);
  if (g.size() > 1) {
    send_waited_before_receive(g, ctx.log, 3);
    send_waited_before_receive(g, ctx.log, (size_t{2} << 20) + 1);  // 8 MiB + 4: read by the receiver
    receive_waited_while_another_thread_sends(g, ctx.log);
    unwaited_send_is_delivered(g, ctx.log);
  }
  ctx.log.end_case();
}

}  // namespace kolo::coltest

// Scenario "who-runs" (any world size): whichever thread ends up running a collective (the
// caller inside wait(), or the group's engine thread), the results, the order and progress are
// the same (see "Who runs an operation" in src/engine/executor.hpp):
//  - after waited collectives (callers that wait at once), a collective nobody waits for still
//    completes on its own: its callback has run after 500 ms without wait() or is_completed();
//  - three collectives issued back to back and only the last one waited for all complete, in
//    issue order, with the right results;
//  - an Options.overlap collective polled with is_completed() completes;
//  - a long run of issue-then-wait allreduces gives the right result every time.
#include <atomic>
#include <chrono>
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

}  // namespace

void scenario_who_runs(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  unwaited_collective_progresses(g, ctx.log);
  back_to_back_then_wait_last(g, ctx.log);
  overlap_option_polled(g, ctx.log);
  many_issue_then_wait(g, ctx.log);
  ctx.log.end_case();
}

}  // namespace kolo::coltest

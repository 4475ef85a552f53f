// Scenario "work-api" (2 ranks): the Work handle. Rank 1 joins an allreduce 1.5 s late, so
// rank 0's wait(200 ms) must throw TimeoutError while the operation goes on (is_completed
// false, no exception), an on_complete callback registered meanwhile must run exactly once
// when it completes, and one registered afterwards must run at once on the calling thread.
// Then a receive with a 500 ms timeout that nobody sends to must fail: is_completed true,
// is_success false, exception() rethrowing a TimeoutError.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void late_allreduce(ProcessGroup& g, CheckLog& log) {
  log.begin_case("wait(timeout) on an allreduce a peer joins late");
  std::vector<int32_t> v(100, g.rank() + 1);
  if (g.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    g.allreduce(Buffer(v.data(), v.size()))->wait();
  } else {
    WorkPtr w = g.allreduce(Buffer(v.data(), v.size()));
    const auto start = Clock::now();
    bool timed_out = false;
    try {
      w->wait(std::chrono::milliseconds(200));
    } catch (const TimeoutError&) {
      timed_out = true;
    }
    const double waited = seconds_since(start);
    log.expect(timed_out, "wait(200 ms) did not throw TimeoutError while the peer was away");
    log.expect(waited >= 0.19 && waited < 1.2, "wait(200 ms) returned after " + std::to_string(waited) + " s");
    log.expect(!w->is_completed(), "is_completed() is true while the peer is away");
    log.expect(w->exception() == nullptr, "exception() is set on a running operation");

    std::atomic<int> calls{0};
    std::atomic<bool> on_this_thread{false};
    const auto waiter = std::this_thread::get_id();
    w->on_complete([&](Work& done) {
      calls++;
      on_this_thread = std::this_thread::get_id() == waiter;
      (void)done;
    });
    w->wait(std::chrono::milliseconds(30000));
    log.expect(w->is_completed() && w->is_success(), "the allreduce did not succeed once the peer joined");
    log.expect(w->exception() == nullptr, "exception() set after success");
    log.expect(calls == 1, "the callback ran " + std::to_string(calls.load()) + " times, not once");

    // Registered after completion: runs at once, on this thread, before on_complete returns.
    bool ran_here = false;
    w->on_complete([&](Work&) { ran_here = std::this_thread::get_id() == waiter; });
    log.expect(ran_here, "a callback registered after completion did not run at once on the caller's thread");
  }
  log.expect_elements("allreduce", DataType::int32, v.data(), v.size(), [](size_t) { return 3.0L; });
}

void failing_receive(ProcessGroup& g, CheckLog& log) {
  log.begin_case("receive that times out");
  if (g.rank() == 1) {
    // Stay connected (and silent) until rank 0's receive has timed out.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    return;
  }
  std::vector<float> buf(10);
  RecvOptions o;
  o.timeout = std::chrono::milliseconds(500);
  WorkPtr w = g.recv(Buffer(buf.data(), buf.size()), 1, o);
  const auto start = Clock::now();
  bool timed_out = false;
  try {
    w->wait(std::chrono::milliseconds(10000));
  } catch (const TimeoutError&) {
    timed_out = true;
  } catch (const Error& e) {
    log.expect(false, std::string("expected a TimeoutError, got: ") + e.what());
  }
  log.expect(timed_out, "the receive did not fail with a TimeoutError");
  log.expect(seconds_since(start) < 5.0, "the receive took " + std::to_string(seconds_since(start)) + " s to time out");
  log.expect(w->is_completed(), "is_completed() false after the failure");
  log.expect(!w->is_success(), "is_success() true after the failure");
  bool rethrows_timeout = false;
  try {
    if (w->exception()) std::rethrow_exception(w->exception());
  } catch (const TimeoutError&) {
    rethrows_timeout = true;
  } catch (...) {
  }
  log.expect(rethrows_timeout, "exception() does not hold the TimeoutError");
  bool callback_ran = false;
  w->on_complete([&](Work& done) { callback_ran = !done.is_success(); });
  log.expect(callback_ran, "a callback on a failed operation did not run at once");
}

}  // namespace

void scenario_work_api(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  late_allreduce(g, ctx.log);
  failing_receive(g, ctx.log);
  ctx.log.end_case();
  // The group saw a failed receive: leave without the collective goodbye.
  g.abort("work-api scenario done");
  ctx.group.reset();
}

}  // namespace kolo::coltest

// Scenario "device" (2 ranks, KOLO_TEST_DEVICE_MEMORY=1): the stream semantics of operations
// on device memory, on the host stand-in (CI) or a real GPU (device-check.sh):
//  - an operation starts after the work queued on its stream before it (a host function that
//    writes the input late is seen);
//  - wait() returns without waiting for a late peer, and work queued on the stream after it
//    sees the result; is_completed() is false meanwhile, true after synchronize();
//  - mixed host and device buffers, a host pointer marked as device memory and a device that
//    does not exist are refused before anything moves, and the group still works;
//  - a stream that never reaches the operation fails it within its timeout (TimeoutError at
//    synchronize(), the peer fails too, the stream is not left waiting, the next call fails).
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/device_runtime.hpp"
#include "test_memory.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct DeviceFloats {
  float* p;
  size_t n;
  explicit DeviceFloats(size_t count) : p(static_cast<float*>(test_alloc(count * sizeof(float)))), n(count) {}
  ~DeviceFloats() { test_free(p); }
  Buffer buffer() { return TestBuffer(p, n, DataType::float32); }
};

void ordered_after_stream_work(ProcessGroup& g, kernels::DeviceRuntime& rt, CheckLog& log) {
  log.begin_case("an operation starts after the work queued on its stream");
  DeviceFloats v(1000);
  for (size_t i = 0; i < v.n; ++i) v.p[i] = -1;
  // The stream writes the real input 300 ms from now; the operation is issued at once.
  const int rank = g.rank();
  rt.host_fn(nullptr, [&v, rank] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (size_t i = 0; i < v.n; ++i) v.p[i] = static_cast<float>(rank + 1) * static_cast<float>(i);
  });
  g.allreduce(v.buffer())->synchronize(std::chrono::seconds(30));
  log.expect_elements("allreduce", DataType::float32, v.p, v.n, [](size_t i) { return 3.0L * i; });
}

void wait_does_not_block(ProcessGroup& g, kernels::DeviceRuntime& rt, CheckLog& log) {
  log.begin_case("wait() returns at once; the stream waits for the result");
  DeviceFloats v(4096);
  for (size_t i = 0; i < v.n; ++i) v.p[i] = static_cast<float>(g.rank() + 1);
  if (g.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    g.allreduce(v.buffer())->synchronize(std::chrono::seconds(30));
  } else {
    WorkPtr w = g.allreduce(v.buffer());
    const auto start = Clock::now();
    w->wait();
    const double waited = seconds_since(start);
    log.expect(waited < 0.5, "wait() blocked the host for " + std::to_string(waited) + " s while the peer was away");
    log.expect(!w->is_completed(), "is_completed() is true while the peer is away");
    std::atomic<float> seen_by_stream{0};
    rt.host_fn(nullptr, [&] { seen_by_stream = v.p[v.n - 1]; });
    w->synchronize(std::chrono::seconds(30));
    rt.synchronize(nullptr);
    log.expect(w->is_completed() && w->is_success(), "not completed and successful after synchronize()");
    log.expect(seen_by_stream == 3.0f, "work queued on the stream after wait() saw " + std::to_string(seen_by_stream.load()) +
                                           ", not the result 3");
  }
  log.expect_elements("allreduce", DataType::float32, v.p, v.n, [](size_t) { return 3.0L; });
}

template <class Fn>
bool refused(Fn fn, const char* expect_in_message, std::string& message) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    message = e.what();
    return message.find(expect_in_message) != std::string::npos;
  }
  message = "(nothing thrown)";
  return false;
}

void refusals(ProcessGroup& g, CheckLog& log) {
  log.begin_case("mixed, mislabelled and missing devices are refused");
  DeviceFloats d(16);
  std::vector<float> host(16, 1.0f);
  std::string msg;
  const Device dev = test_device();
  log.expect(refused([&] { g.allreduce(Buffer(host.data(), 16), d.buffer()); }, "one device", msg),
             "host send and device receive buffers: " + msg);
  log.expect(refused([&] { g.allreduce(Buffer(host.data(), 16, DataType::float32, dev)); }, "not device memory", msg),
             "a host pointer marked as device memory: " + msg);
  log.expect(refused([&] { g.allreduce(Buffer(d.p, 16, DataType::float32, Device::cuda(dev.index + 64))); }, "cuda:", msg),
             "a device that does not exist: " + msg);
  // Nothing moved: the group still works, on device memory.
  for (size_t i = 0; i < d.n; ++i) d.p[i] = 2.0f;
  g.allreduce(d.buffer())->synchronize(std::chrono::seconds(30));
  log.expect_elements("allreduce after the refusals", DataType::float32, d.p, d.n, [](size_t) { return 4.0L; });
}

void stuck_stream(ProcessGroup& g, kernels::DeviceRuntime& rt, CheckLog& log) {
  log.begin_case("a stream that never reaches the operation fails it within its timeout");
  DeviceFloats v(64);
  for (size_t i = 0; i < v.n; ++i) v.p[i] = 1.0f;
  AllreduceOptions o;
  o.timeout = std::chrono::milliseconds(800);
  std::atomic<bool> release{false};
  if (g.rank() == 0) {
    // A separate stream, blocked by a host function until the end of the case.
    void* stream = rt.create_stream();
    rt.host_fn(stream, [&] {
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
    o.stream = stream;
    const auto start = Clock::now();
    WorkPtr w = g.allreduce(v.buffer(), o);
    w->wait();  // queues the stream's wait for the result before the failure is known
    bool timed_out = false;
    std::string what;
    try {
      w->synchronize(std::chrono::seconds(30));
    } catch (const TimeoutError& e) {
      timed_out = true;
      what = e.what();
    } catch (const Error& e) {
      what = e.what();
    }
    const double took = seconds_since(start);
    log.expect(timed_out, "synchronize() did not throw TimeoutError: " + what);
    log.expect(what.find("allreduce") != std::string::npos, "the error does not name the collective: " + what);
    log.expect(took < 10, "the failure took " + std::to_string(took) + " s");
    log.expect(w->is_completed() && !w->is_success(), "is_completed()/is_success() wrong after the failure");
    bool rethrown = false;
    try {
      w->wait();
    } catch (const TimeoutError&) {
      rethrown = true;
    }
    log.expect(rethrown, "wait() after the failure did not rethrow it");
    release = true;
    // The stream must not be left waiting: the flag it waits on is raised on failure too.
    rt.synchronize(stream);
    rt.destroy_stream(stream);
  } else {
    bool failed = false;
    try {
      g.allreduce(v.buffer(), o)->synchronize(std::chrono::seconds(30));
    } catch (const Error&) {
      failed = true;
    }
    log.expect(failed, "the peer's allreduce did not fail");
  }
  bool next_fails = false;
  try {
    g.allreduce(v.buffer())->synchronize(std::chrono::seconds(30));
  } catch (const Error&) {
    next_fails = true;
  }
  log.expect(next_fails, "the group's next call did not fail");
}

}  // namespace

void scenario_device(WorkerContext& ctx) {
  if (!test_on_device()) throw std::runtime_error("the device scenario needs KOLO_TEST_DEVICE_MEMORY=1");
  test_device();
  kernels::DeviceRuntime& rt = *kernels::device_runtime();
  ProcessGroup& g = ctx.join();
  ctx.say(std::string("device runtime: ") + rt.name() + ", " + device_name(test_device()) +
          ", streams wait on flags: " + (rt.can_wait_on_flags() ? "yes" : "no (host waits, then events)"));
  ordered_after_stream_work(g, rt, ctx.log);
  wait_does_not_block(g, rt, ctx.log);
  refusals(g, ctx.log);
  stuck_stream(g, rt, ctx.log);
  ctx.log.end_case();
  g.abort("device scenario done");
  ctx.group.reset();
}

}  // namespace kolo::coltest

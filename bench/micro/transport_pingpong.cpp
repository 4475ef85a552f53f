// Transport latency and bandwidth through kolo's point-to-point API, per transport (tcp, shm):
//   pingpong/<transport>/<bytes>   rank 0 sends, rank 1 echoes: time per round trip; the
//                                  "one_way_us" counter is half of it (OSU osu_latency's number)
//   stream/<transport>/<bytes>     rank 0 sends back to back (up to kWindow in flight), rank 1
//                                  receives and acknowledges the batch: GB/s (10^9 bytes/s)
// Rank 0 is this process (it runs Google Benchmark); rank 1 is a forked echo server, one per
// transport, that obeys a small control message sent before each benchmark. Both join one
// ProcessGroup through a FileStore, so it is a real 2-process run over the real transport.
//   kolo-bench-transport [--transports tcp,shm] [google-benchmark flags]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <string>
#include <vector>

#include "partner_bench.hpp"
#include "kolo/kolo.hpp"

namespace {

constexpr size_t kMaxBytes = size_t{16} << 20;
constexpr int kWindow = 8;  // sends in flight while streaming
constexpr std::chrono::milliseconds kTimeout{60000};

enum Mode : int64_t { kStop = 0, kPingPong = 1, kStream = 2 };

// What rank 1 must do next: mode, message bytes, message count.
struct Control {
  int64_t mode;
  int64_t bytes;
  int64_t count;
};

kolo::Buffer bytes_of(void* p, size_t n) { return kolo::Buffer(p, n, kolo::DataType::uint8); }

void send_control(kolo::ProcessGroup& g, Control c) {
  g.send(kolo::Buffer(reinterpret_cast<int64_t*>(&c), 3), 1)->wait(kTimeout);
}

// Rank 1: echoes or absorbs what rank 0 asks for until told to stop.
int serve(kolo::ProcessGroup& g) {
  std::vector<unsigned char> buf(kMaxBytes);
  unsigned char ack = 1;
  for (;;) {
    Control c{};
    g.recv(kolo::Buffer(reinterpret_cast<int64_t*>(&c), 3), 0)->wait(kTimeout);
    if (c.mode == kStop) return 0;
    const auto n = static_cast<size_t>(c.bytes);
    for (int64_t i = 0; i < c.count; ++i) {
      g.recv(bytes_of(buf.data(), n), 0)->wait(kTimeout);
      if (c.mode == kPingPong) g.send(bytes_of(buf.data(), n), 0)->wait(kTimeout);
    }
    if (c.mode == kStream) g.send(bytes_of(&ack, 1), 0)->wait(kTimeout);
  }
}

void BM_pingpong(benchmark::State& state, kolo::ProcessGroup* group) {
  kolo::ProcessGroup& g = *group;
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<unsigned char> buf(n, 7);
  send_control(g, {kPingPong, static_cast<int64_t>(n), static_cast<int64_t>(state.max_iterations)});
  for (auto _ : state) {
    g.send(bytes_of(buf.data(), n), 1)->wait(kTimeout);
    g.recv(bytes_of(buf.data(), n), 1)->wait(kTimeout);
  }
  state.counters["one_way_us"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2e-6, benchmark::Counter::kIsRate |
                                                                              benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * n));
}

void BM_stream(benchmark::State& state, kolo::ProcessGroup* group) {
  kolo::ProcessGroup& g = *group;
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<unsigned char> buf(n, 7);
  unsigned char ack = 0;
  send_control(g, {kStream, static_cast<int64_t>(n), static_cast<int64_t>(state.max_iterations)});
  std::deque<kolo::WorkPtr> in_flight;
  for (auto _ : state) {
    if (in_flight.size() == kWindow) {
      in_flight.front()->wait(kTimeout);
      in_flight.pop_front();
    }
    in_flight.push_back(g.send(bytes_of(buf.data(), n), 1));
  }
  for (const kolo::WorkPtr& w : in_flight) w->wait(kTimeout);
  g.recv(bytes_of(&ack, 1), 1)->wait(kTimeout);  // every byte has arrived
  const double total = static_cast<double>(state.iterations()) * static_cast<double>(n);
  state.counters["GB/s"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(total));
}

std::shared_ptr<kolo::ProcessGroup> join(const std::string& store_path, int rank, const std::string& transport) {
  kolo::GroupOptions o;
  o.transport = transport;
  o.timeout = kTimeout;
  o.name = "pingpong-" + transport;
  return kolo::ProcessGroup::create(kolo::make_file_store(store_path, 2), rank, 2, o);
}

}  // namespace

// Every transport's echo server is forked first, then every benchmark registered and run in one
// RunSpecifiedBenchmarks (a second call crashes Debian's google-benchmark 1.7.1).
int main(int argc, char** argv) {
  auto args = kolo::bench::parse_partner_bench_cli(
      argc, argv, "kolo-bench-transport", "tcp,shm",
      "Ping-pong latency and streaming bandwidth per transport between 2 processes.");
  if (!args || !kolo::bench::initialize_benchmark(args->benchmark_args)) return 2;
  std::map<std::string, kolo::bench::Partner> partners;
  for (const std::string& t : args->transports) {
    auto p = kolo::bench::fork_partner("kolo-bench-transport", t, [&](const std::string& store) {
      auto g = join(store, 1, t);
      const int code = serve(*g);
      g->shutdown();
      return code;
    });
    if (!p) return 3;
    partners[t] = *p;
  }
  int code = 0;
  std::map<std::string, std::shared_ptr<kolo::ProcessGroup>> groups;
  try {
    for (const auto& [t, p] : partners) {
      kolo::ProcessGroup* g = (groups[t] = join(p.store(), 0, t)).get();
      for (size_t n = 8; n <= kMaxBytes; n *= 8)
        benchmark::RegisterBenchmark(("pingpong/" + t).c_str(), BM_pingpong, g)->Arg(static_cast<int64_t>(n))->UseRealTime();
      for (size_t n = 4096; n <= kMaxBytes; n *= 4)
        benchmark::RegisterBenchmark(("stream/" + t).c_str(), BM_stream, g)->Arg(static_cast<int64_t>(n))->UseRealTime();
    }
    benchmark::RunSpecifiedBenchmarks();
    for (const auto& [t, g] : groups) {
      send_control(*g, {kStop, 0, 0});
      g->shutdown();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo-bench-transport: rank 0: %s\n", e.what());
    code = 3;
  }
  for (const auto& [t, p] : partners)
    if (!p.finish(code != 0) && code == 0) code = 3;
  benchmark::Shutdown();
  return code;
}

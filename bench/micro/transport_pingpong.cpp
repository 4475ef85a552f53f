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
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "common/cli.hpp"
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

kolo::ProcessGroup* g_group = nullptr;  // rank 0's group for the transport being measured

void BM_pingpong(benchmark::State& state) {
  kolo::ProcessGroup& g = *g_group;
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

void BM_stream(benchmark::State& state) {
  kolo::ProcessGroup& g = *g_group;
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

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) parts.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

std::shared_ptr<kolo::ProcessGroup> join(const std::string& store_path, int rank, const std::string& transport) {
  kolo::GroupOptions o;
  o.transport = transport;
  o.timeout = kTimeout;
  o.name = "pingpong-" + transport;
  return kolo::ProcessGroup::create(kolo::make_file_store(store_path, 2), rank, 2, o);
}

// One transport: fork the echo server, join, run every benchmark, stop the server.
int measure(const std::string& transport) {
  char dir_template[] = "/tmp/kolo-bench-transport-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("kolo-bench-transport: mkdtemp");
    return 3;
  }
  const std::string store_path = std::string(dir_template) + "/store";
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("kolo-bench-transport: fork");
    return 3;
  }
  if (child == 0) {
    int code = 3;
    try {
      auto g = join(store_path, 1, transport);
      code = serve(*g);
      g->shutdown();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kolo-bench-transport: rank 1 (%s): %s\n", transport.c_str(), e.what());
    }
    std::_Exit(code);
  }
  int code = 0;
  try {
    auto g = join(store_path, 0, transport);
    g_group = g.get();
    benchmark::ClearRegisteredBenchmarks();
    for (size_t n = 8; n <= kMaxBytes; n *= 8) {
      benchmark::RegisterBenchmark(("pingpong/" + transport).c_str(), BM_pingpong)->Arg(static_cast<int64_t>(n))->UseRealTime();
    }
    for (size_t n = 4096; n <= kMaxBytes; n *= 4) {
      benchmark::RegisterBenchmark(("stream/" + transport).c_str(), BM_stream)->Arg(static_cast<int64_t>(n))->UseRealTime();
    }
    benchmark::RunSpecifiedBenchmarks();
    send_control(*g, {kStop, 0, 0});
    g->shutdown();
    g_group = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo-bench-transport: rank 0 (%s): %s\n", transport.c_str(), e.what());
    kill(child, SIGKILL);
    code = 3;
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (code == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) code = 3;
  std::error_code ignored;
  std::filesystem::remove_all(dir_template, ignored);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::string transport_list = "tcp,shm";
  bool help = false;
  CLI::App app{"", "kolo-bench-transport"};
  kolo::cli::configure(app, "usage: kolo-bench-transport [--transports tcp,shm] [google-benchmark flags]\n");
  app.description("Ping-pong latency and streaming bandwidth per transport between 2 processes.");
  app.allow_extras();  // google-benchmark's own flags (--benchmark_filter=...): passed on to it
  app.add_option("--transports", transport_list, "transports to measure, comma-separated (tcp,shm)")->type_name("LIST");
  kolo::cli::add_help(app, help, "show this help, then google-benchmark's flags");
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "kolo-bench-transport: %s\n", e.what());
    return 2;
  }
  std::vector<std::string> passed = app.remaining();
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    passed = {"--help"};  // google-benchmark prints its flags and exits
  }
  const std::vector<std::string> transports = split(transport_list);
  std::vector<char*> rest = {argv[0]};
  for (std::string& a : passed) rest.push_back(a.data());
  int rest_count = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_count, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_count, rest.data())) return 2;
  int code = 0;
  for (const std::string& t : transports) {
    const int c = measure(t);
    if (c != 0) code = c;
  }
  benchmark::Shutdown();
  return code;
}

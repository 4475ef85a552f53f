// kolo-bench-connect: what forming a group costs, connecting eagerly or lazily (KOLO_CONNECT):
//   KOLO_TRANSPORT=tcp KOLO_CONNECT=lazy kolorun -n 8 kolo-bench-connect [--bytes N]
// Each rank times the world group's creation (init_from_env), its first all-reduce of N bytes
// (float32, default 1 MiB), a second one, and then a first all-to-all; it counts its sockets
// (/proc/self/fd) after each step. Rank 0 prints one JSON line: the slowest rank's time for each
// step (every step ends when the slowest rank is done) and the sockets of rank 1 (rank 0 also
// holds the store's server sockets) after each step.
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kolo/kolo.hpp"
#include "open_sockets.hpp"

namespace {

using Clock = std::chrono::steady_clock;

using kolo::testing_support::open_sockets;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 1 << 20;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--bytes" && i + 1 < argc) {
      bytes = std::stoul(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--bytes N]\n", argv[0]);
      return 2;
    }
  }
  const int before = open_sockets();
  auto t = Clock::now();
  auto pg = kolo::init_from_env();
  const double create_ms = ms_since(t);
  const int after_create = open_sockets();

  std::vector<float> v(bytes / sizeof(float), 1.0f);
  t = Clock::now();
  pg->allreduce(kolo::Buffer(v.data(), v.size()))->wait();
  const double first_ms = ms_since(t);
  const int after_first = open_sockets();
  t = Clock::now();
  pg->allreduce(kolo::Buffer(v.data(), v.size()))->wait();
  const double second_ms = ms_since(t);

  const size_t n = static_cast<size_t>(pg->size());
  std::vector<float> out(n * 256, 1.0f), in(n * 256);
  t = Clock::now();
  pg->alltoall(kolo::Buffer(out.data(), out.size()), kolo::Buffer(in.data(), in.size()))->wait();
  const double alltoall_ms = ms_since(t);
  const int after_alltoall = open_sockets();

  // Every step ends when its slowest rank is done: report the maxima.
  std::vector<double> times = {create_ms, first_ms, second_ms, alltoall_ms};
  kolo::AllreduceOptions mx;
  mx.op = kolo::ReduceKind::max;
  pg->allreduce(kolo::Buffer(times.data(), times.size()), mx)->wait();
  std::vector<int32_t> mine = {after_create - before, after_first - before, after_alltoall - before};
  std::vector<int32_t> all(3 * n);
  pg->allgather(kolo::Buffer(mine.data(), mine.size()), kolo::Buffer(all.data(), all.size()))->wait();
  if (pg->rank() == 0) {
    const char* mode = std::getenv("KOLO_CONNECT");
    const size_t r1 = n > 1 ? 3 : 0;
    std::printf("{\"ranks\": %zu, \"connect\": \"%s\", \"bytes\": %zu, \"create_ms\": %.2f, \"first_allreduce_ms\": %.2f, "
                "\"second_allreduce_ms\": %.2f, \"first_alltoall_ms\": %.2f, \"rank1_sockets_after_create\": %d, "
                "\"rank1_sockets_after_allreduce\": %d, \"rank1_sockets_after_alltoall\": %d}\n",
                n, mode ? mode : "eager", bytes, times[0], times[1], times[2], times[3], all[r1], all[r1 + 1], all[r1 + 2]);
  }
  pg->shutdown();
  return 0;
}

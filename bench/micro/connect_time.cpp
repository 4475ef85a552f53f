// kolo-bench-connect: what forming a group costs, connecting eagerly or lazily (KOLO_CONNECT):
//   KOLO_TRANSPORT=tcp KOLO_CONNECT=lazy kolorun -n 8 kolo-bench-connect [--bytes N]
// Each rank times the world group's creation (init_from_env), its first all-reduce of N bytes
// (float32, default 1 MiB), a second one, and then a first all-to-all; it counts its sockets
// (/proc/self/fd) after each step. Rank 0 prints one JSON line: the slowest rank's time for each
// step (every step ends when the slowest rank is done) and the sockets of rank 1 (rank 0 also
// holds the store's server sockets) after each step.
//
// With --split it then times subgroups, split(rank % 2, rank) of the world, made both ways: an
// ordinary split (it connects its members anew) and one with SplitOptions.share_connections
// (it runs on the world's connections): the split's time, the sockets it opened (rank 1's) and
// the child's first and second all-reduce of N bytes. Rank 0 prints a second JSON line.
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "kolo/kolo.hpp"
#include "open_sockets.hpp"

namespace {

using Clock = std::chrono::steady_clock;

using kolo::testing_support::open_sockets;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// One way of splitting: {split ms, first all-reduce ms, second all-reduce ms} (this rank's) and
// the sockets the split opened.
struct SplitCost {
  std::vector<double> ms;
  int32_t sockets = 0;
};

SplitCost time_split(kolo::ProcessGroup& world, bool share, std::vector<float>& v) {
  kolo::SplitOptions o;
  o.share_connections = share;
  world.barrier()->wait();
  const int before = open_sockets();
  auto t = Clock::now();
  auto child = world.split(world.rank() % 2, world.rank(), o);
  SplitCost c;
  c.ms.push_back(ms_since(t));
  c.sockets = open_sockets() - before;
  for (int i = 0; i < 2; ++i) {
    t = Clock::now();
    child->allreduce(kolo::Buffer(v.data(), v.size()))->wait();
    c.ms.push_back(ms_since(t));
  }
  child->shutdown();
  return c;
}

void report_splits(kolo::ProcessGroup& world, std::vector<float>& v) {
  const SplitCost plain = time_split(world, false, v), shared = time_split(world, true, v);
  std::vector<double> times = plain.ms;
  times.insert(times.end(), shared.ms.begin(), shared.ms.end());
  kolo::AllreduceOptions mx;
  mx.op = kolo::ReduceKind::max;
  world.allreduce(kolo::Buffer(times.data(), times.size()), mx)->wait();
  const size_t n = static_cast<size_t>(world.size());
  std::vector<int32_t> mine = {plain.sockets, shared.sockets}, all(2 * n);
  world.allgather(kolo::Buffer(mine.data(), mine.size()), kolo::Buffer(all.data(), all.size()))->wait();
  if (world.rank() != 0) return;
  const size_t r1 = n > 1 ? 2 : 0;
  std::printf("{\"ranks\": %zu, \"transport\": \"%s\", \"split_ms\": %.2f, \"split_first_allreduce_ms\": %.2f, "
              "\"split_second_allreduce_ms\": %.2f, \"rank1_split_sockets\": %d, \"share_split_ms\": %.2f, "
              "\"share_first_allreduce_ms\": %.2f, \"share_second_allreduce_ms\": %.2f, \"rank1_share_split_sockets\": %d}\n",
              n, std::getenv("KOLO_TRANSPORT") ? std::getenv("KOLO_TRANSPORT") : "auto", times[0], times[1], times[2],
              all[r1], times[3], times[4], times[5], all[r1 + 1]);
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 1 << 20;
  bool splits = false, help = false;
  CLI::App app{"", "kolo-bench-connect"};
  kolo::cli::configure(app, "usage: kolorun -n P kolo-bench-connect [--bytes N] [--split]\n");
  app.description("What forming a group costs (KOLO_CONNECT=eager or lazy): creation, first all-reduce and\n"
                  "all-to-all, sockets per rank.");
  app.add_option("--bytes", bytes, "bytes per rank of the first all-reduce and all-to-all (1048576)")->type_name("N");
  app.add_flag("--split", splits, "then time subgroups split(rank % 2, rank), ordinary and sharing connections");
  kolo::cli::add_help(app, help);
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "kolo-bench-connect: %s\n%s", e.what(), kolo::cli::help(app).c_str());
    return 2;
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    return 0;
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
  std::fflush(stdout);
  if (splits) report_splits(*pg, v);
  pg->shutdown();
  return 0;
}

// The cost of one collective that moves (almost) nothing: what kolo's per-call software costs,
// issue + wait, as a number CI's benchmark quick mode prints (issue 12: the synchronous path
// should cost little beyond the data movement).
//   overhead/1rank/<collective>              a group of one (in-process store, no peers)
//   overhead/2ranks/<transport>/<collective> rank 0 here, rank 1 a forked partner
// Collectives: allreduce of one float, broadcast of one float, barrier. The partner runs the
// same collectives forever: rank 0 ends each benchmark (and finally the partner) through the
// value it contributes to an extra max-all-reduce, so neither side needs to know the other's
// iteration count.
//   kolo-bench-overhead [--transports shm,tcp] [google-benchmark flags]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "partner_bench.hpp"
#include "kolo/kolo.hpp"

namespace {

constexpr std::chrono::milliseconds kTimeout{60000};

// The max-all-reduce that ends a benchmark: rank 0 contributes one of these.
constexpr float kGoOn = 1, kEndBenchmark = 2, kQuit = 3;

enum class Coll : int { allreduce, broadcast, barrier };

void one(kolo::ProcessGroup& g, Coll c, float* x) {
  switch (c) {
    case Coll::allreduce: g.allreduce(kolo::Buffer(x, 1))->wait(kTimeout); return;
    case Coll::broadcast: g.broadcast(kolo::Buffer(x, 1))->wait(kTimeout); return;
    case Coll::barrier: g.barrier()->wait(kTimeout); return;
  }
}

float control(kolo::ProcessGroup& g, float mine) {
  kolo::AllreduceOptions o;
  o.op = kolo::ReduceKind::max;
  g.allreduce(kolo::Buffer(&mine, 1), o)->wait(kTimeout);
  return mine;
}

// Rank 1: the collective rank 0 names in each round, until told to quit.
int partner(kolo::ProcessGroup& g) {
  float x = 0;
  for (;;) {
    float coll = control(g, 0);  // rank 0 announces the next benchmark's collective (or quit)
    if (coll >= 10 * kQuit) return 0;
    for (;;) {
      if (control(g, kGoOn) == kEndBenchmark) break;
      one(g, static_cast<Coll>(static_cast<int>(coll)), &x);
    }
  }
}

std::map<std::string, std::shared_ptr<kolo::ProcessGroup>> g_groups;  // "1rank", "shm", "tcp"

void BM_overhead(benchmark::State& state, std::string group, Coll c) {
  kolo::ProcessGroup& g = *g_groups.at(group);
  float x = 1;
  const bool paired = g.size() > 1;
  if (paired) control(g, static_cast<float>(static_cast<int>(c)));
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    // With a partner, each round is announced (one extra 4-byte max-all-reduce). It is timed
    // with the rest, so a 2-rank figure is the cost of two collectives: halve it (us_per_call).
    if (paired) control(g, kGoOn);
    one(g, c, &x);
  }
  const double elapsed_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  if (paired) control(g, kEndBenchmark);
  const double calls = static_cast<double>(state.iterations()) * (paired ? 2 : 1);
  state.counters["us_per_call"] = elapsed_us / calls;  // wall clock
}

std::shared_ptr<kolo::ProcessGroup> join(const std::string& store, int rank, const std::string& transport) {
  kolo::GroupOptions o;
  o.transport = transport;
  o.timeout = kTimeout;
  o.name = "overhead-" + transport;
  return kolo::ProcessGroup::create(kolo::make_file_store(store, 2), rank, 2, o);
}

}  // namespace

int main(int argc, char** argv) {
  auto args = kolo::bench::parse_partner_bench_cli(
      argc, argv, "kolo-bench-overhead", "shm,tcp",
      "The per-call cost of a collective that moves nothing: a group of one, and 2 ranks per transport.");
  if (!args || !kolo::bench::initialize_benchmark(args->benchmark_args)) return 2;
  // Partners are forked before this process starts any thread.
  std::map<std::string, kolo::bench::Partner> partners;
  for (const auto& t : args->transports) {
    auto p = kolo::bench::fork_partner("kolo-bench-overhead", t,
                                       [&](const std::string& store) { return partner(*join(store, 1, t)); });
    if (!p) return 3;
    partners[t] = *p;
  }
  try {
    // The group's timeout equals the waits' (as in join()): a wait() whose own timeout is
    // shorter than the operation's does not run it inline (it could not give up in time), and
    // every call would then pay the hand-off to the engine thread.
    kolo::GroupOptions one;
    one.timeout = kTimeout;
    g_groups["1rank"] = kolo::ProcessGroup::create(kolo::make_hash_store(), 0, 1, one);
    for (const auto& [t, p] : partners) g_groups[t] = join(p.store(), 0, t);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo-bench-overhead: %s\n", e.what());
    return 3;
  }
  const std::pair<const char*, Coll> colls[] = {
      {"allreduce", Coll::allreduce}, {"broadcast", Coll::broadcast}, {"barrier", Coll::barrier}};
  for (const auto& [name, c] : colls) {
    benchmark::RegisterBenchmark((std::string("overhead/1rank/") + name).c_str(), BM_overhead, "1rank", c)
        ->UseRealTime();
    for (const auto& t : args->transports) {
      benchmark::RegisterBenchmark(("overhead/2ranks/" + t + "/" + name).c_str(), BM_overhead, t, c)->UseRealTime();
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  int rc = 0;
  for (const auto& [t, p] : partners) {
    control(*g_groups.at(t), 10 * kQuit);
    g_groups.at(t)->shutdown();
    if (!p.finish()) rc = 1;
  }
  return rc;
}

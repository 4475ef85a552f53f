// What one synchronous collective costs in instructions: the per-call software of issue + wait.
// Timings on a shared 2-core machine are noise; callgrind's instruction count is exact.
// scripts/bench/per-call-instructions.sh runs this under callgrind, collecting inside measure() only
// (the calling thread, which runs the operation inline), for two iteration counts and reports
// the difference per call; with --versus-mpi it runs bench/peers/mpi_per_call_instructions.cpp
// (the same calls through Open MPI) beside it on two ranks.
//   kolo-per-call-instructions allreduce|broadcast|barrier|sendrecv|empty|gather|scatter|reduce ITERATIONS
// Alone it is a group of one; under a launcher (kolorun -n 2 valgrind ...) every rank counts its
// own share of a real exchange (sendrecv: to the next rank, from the previous one; the rooted
// ones from or to rank 0, 2 floats per rank).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kolo/kolo.hpp"
#include "per_call_driver.hpp"

namespace {
enum Op { kAllreduce, kBroadcast, kBarrier, kSendrecv, kEmpty, kGather, kScatter, kReduce, kNumOps };
const char* const kNames[kNumOps] = {"allreduce", "broadcast", "barrier", "sendrecv", "empty", "gather", "scatter", "reduce"};
}  // namespace

extern "C" __attribute__((noinline)) void measure(kolo::ProcessGroup& g, int n, int which, float* x) {
  const int p = g.size();
  for (int i = 0; i < n; ++i) {
    switch (which) {
      case kAllreduce: g.allreduce(kolo::Buffer(x, 1))->wait(); break;
      case kBroadcast: g.broadcast(kolo::Buffer(x, 1))->wait(); break;
      case kBarrier: g.barrier()->wait(); break;
      case kEmpty: g.allreduce(kolo::Buffer(x, 0))->wait(); break;  // count 0: nothing moves (issue's shortcut)
      case kGather: g.gather(kolo::Buffer(x, 2), kolo::Buffer(x + 2, 2 * p))->wait(); break;
      case kScatter: g.scatter(kolo::Buffer(x, 2 * p), kolo::Buffer(x + 2 * p, 2))->wait(); break;
      case kReduce: g.reduce(kolo::Buffer(x, 2), kolo::Buffer(x + 2, 2))->wait(); break;
      default: {  // kolo-perf's sendrecv: to the next rank, from the previous one
        const int r = g.rank();
        kolo::WorkPtr s = g.send(kolo::Buffer(x, 1), (r + 1) % p);
        kolo::WorkPtr v = g.recv(kolo::Buffer(x + 1, 1), (r + p - 1) % p);
        s->wait();
        v->wait();
      }
    }
  }
}

int main(int argc, char** argv) {
  int code = 0;
  const auto args = kolo::bench::parse_per_call_cli(
      argc, argv, "kolo-per-call-instructions", "usage: kolo-per-call-instructions OPERATION ITERATIONS\n",
      "Runs ITERATIONS synchronous OPERATIONs inside measure(), for callgrind\n"
      "(scripts/bench/per-call-instructions.sh): a group of one, or every rank's share under a launcher.",
      std::vector<std::string>(kNames, kNames + kNumOps), code);
  if (!args) return code;
  const int which = args->operation;
  // Under a launcher (kolorun -n 2 valgrind ...; WORLD_SIZE set) every rank counts its own share
  // of a real exchange; alone, a group of one.
  std::shared_ptr<kolo::ProcessGroup> g;
  if (std::getenv("WORLD_SIZE")) {
    g = kolo::init_from_env();
  } else {
    kolo::GroupOptions o;
    o.secret = "per-call-instructions";
    g = kolo::ProcessGroup::create(kolo::make_hash_store(), 0, 1, o);
  }
  float x[64] = {};  // room for 2 floats per rank, in and out, up to 8 ranks
  if (g->size() > 8) {
    std::fprintf(stderr, "kolo-per-call-instructions: at most 8 ranks\n");
    return 2;
  }
  for (int i = 0; i < 200; ++i) g->allreduce(kolo::Buffer(x, 1))->wait();  // warm: pools sized
  kolo::bench::run_per_call(
      args->iterations, g->rank(), g->size(), which == kBroadcast || which == kScatter,
      which == kGather || which == kReduce, [&] { g->barrier()->wait(); },
      [&](int count) { measure(*g, count, which, x); });
  g->shutdown();
  return 0;
}

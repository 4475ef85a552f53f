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
#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <string>
#include <vector>

#include "common/cli.hpp"
#include "kolo/kolo.hpp"

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
  std::string op;
  int n = 0;
  bool help = false;
  CLI::App app{"", "kolo-per-call-instructions"};
  kolo::cli::configure(app, "usage: kolo-per-call-instructions OPERATION ITERATIONS\n");
  app.description("Runs ITERATIONS synchronous OPERATIONs inside measure(), for callgrind\n"
                  "(scripts/bench/per-call-instructions.sh): a group of one, or every rank's share under a launcher.");
  // Both required, checked after parsing so that --help alone is not an error.
  CLI::Option* op_given = app.add_option("OPERATION", op, "the operation measured")
                              ->check(CLI::IsMember(std::vector<std::string>(kNames, kNames + kNumOps)));
  CLI::Option* n_given = app.add_option("ITERATIONS", n, "calls measured")->type_name("N")->check(CLI::NonNegativeNumber);
  kolo::cli::add_help(app, help);
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
    if (!help && (op_given->count() == 0 || n_given->count() == 0))
      throw CLI::ValidationError("OPERATION and ITERATIONS are required");
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "kolo-per-call-instructions: %s\n%s", e.what(), kolo::cli::help(app).c_str());
    return 2;
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    return 0;
  }
  const int which = static_cast<int>(std::find(kNames, kNames + kNumOps, op) - kNames);
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
  const bool from_root = which == kBroadcast || which == kScatter, to_root = which == kGather || which == kReduce;
  if (g->size() > 1 && (from_root || to_root)) {
    // In batches that the senders send at once (fewer messages than a ring holds: no sender
    // waits for room) while the receivers first sleep 10 ms (outside measure()), so that the
    // messages are there when they call: no rank polls for something not yet sent, and each
    // count is the calls' own instructions, not the polls of a wait.
    constexpr int kBatch = 16;
    const bool receives = from_root ? g->rank() != 0 : g->rank() == 0;
    for (int done = 0; done < n; done += kBatch) {
      const int batch = std::min(kBatch, n - done);
      g->barrier()->wait();
      if (receives) std::this_thread::sleep_for(std::chrono::milliseconds(10 * (g->rank() + 1)));
      measure(*g, batch, which, x);
    }
  } else {
    measure(*g, n, which, x);
  }
  g->shutdown();
  return 0;
}

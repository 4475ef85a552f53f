// What one synchronous collective costs in instructions, on a group of one (no peer, no data to
// speak of): the per-call software of issue + wait and nothing else. Timings on a shared 2-core
// machine are noise; callgrind's instruction count is exact. scripts/per-call-instructions.sh
// runs this under callgrind, collecting inside measure() only (the calling thread, which runs
// the operation inline), for two iteration counts and reports the difference per call.
//   kolo-per-call-instructions allreduce|broadcast|barrier|sendrecv|empty ITERATIONS
// (sendrecv only under a launcher: a send to the next rank and a receive from the previous.)
#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kolo/kolo.hpp"

extern "C" __attribute__((noinline)) void measure(kolo::ProcessGroup& g, int n, int which, float* x) {
  for (int i = 0; i < n; ++i) {
    if (which == 0)
      g.allreduce(kolo::Buffer(x, 1))->wait();
    else if (which == 1)
      g.broadcast(kolo::Buffer(x, 1))->wait();
    else if (which == 2)
      g.barrier()->wait();
    else if (which == 4)
      g.allreduce(kolo::Buffer(x, 0))->wait();  // count 0: nothing moves (issue's shortcut)
    else {  // kolo-perf's sendrecv: to the next rank, from the previous one
      const int r = g.rank(), p = g.size();
      kolo::WorkPtr s = g.send(kolo::Buffer(x, 1), (r + 1) % p);
      kolo::WorkPtr v = g.recv(kolo::Buffer(x + 1, 1), (r + p - 1) % p);
      s->wait();
      v->wait();
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kolo-per-call-instructions allreduce|broadcast|barrier|sendrecv|empty ITERATIONS\n");
    return 2;
  }
  const char* names[] = {"allreduce", "broadcast", "barrier", "sendrecv", "empty"};
  int which = 0;
  while (which < 5 && std::strcmp(argv[1], names[which]) != 0) ++which;
  if (which == 5) {
    std::fprintf(stderr, "kolo-per-call-instructions: unknown operation %s\n", argv[1]);
    return 2;
  }
  const int n = std::atoi(argv[2]);
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
  float x[2] = {1, 1};
  for (int i = 0; i < 200; ++i) g->allreduce(kolo::Buffer(x, 1))->wait();  // warm: pools sized
  if (which == 1 && g->size() > 1) {
    // A broadcast among several ranks, in batches that the root sends at once (fewer messages
    // than a ring holds: it never waits for room) while rank r first sleeps r x 10 ms (outside
    // measure()), so that its messages are there when it calls: no rank polls for something not
    // yet sent, and each count is the calls' own instructions, not the polls of a wait.
    constexpr int kBatch = 16;
    for (int done = 0; done < n; done += kBatch) {
      const int batch = std::min(kBatch, n - done);
      g->barrier()->wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * g->rank()));
      measure(*g, batch, which, x);
    }
  } else {
    measure(*g, n, which, x);
  }
  g->shutdown();
  return 0;
}

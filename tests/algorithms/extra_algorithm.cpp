// An algorithm added the way every algorithm is: this one file, and its one line in a meson
// `files()` list (tests/algorithms/meson.build, for the test program that carries it). Nothing
// else in the tree names it. extra_algorithm_test.cpp then finds it in the registry, in
// KOLO_ALGO, in the cost model's choice and on the engine, and runs it between processes.
//
// All-reduce "star": every rank sends its input to rank 0, which reduces them in rank order and
// sends the result back. Correct at any size, slow at every size: its cost function claims it is
// free, so that the model choosing it proves the model reads descriptors.
#include <atomic>

#include "algorithms/algorithm.hpp"
#include "algorithms/partition.hpp"

namespace kolo::algo {

std::atomic<int> star_runs{0};  // how often this process ran it (the test reads it)

namespace {

void run(Comm& comm) {
  star_runs.fetch_add(1);
  const CollArgs& a = comm.args();
  const int P = comm.size(), r = comm.rank();
  const size_t n = a.bytes();
  if (r != 0) {
    comm.wait(comm.isend(0, a.send, n));
    comm.wait(comm.irecv(0, a.recv, n));
    return;
  }
  char* in = static_cast<char*>(comm.scratch(n, 0));
  copy_unless_same(a.recv, a.send, n);
  for (int from = 1; from < P; ++from) {
    comm.wait(comm.irecv(from, in, n));
    comm.reduce(a.recv, in, a.count);  // (0 op 1) op 2 ...: rank order
  }
  comm.finalize(a.recv, a.count);
  for (int to = 1; to < P; ++to) comm.wait(comm.isend(to, a.recv, n));
}

double predict(const CostQuery&) { return 0; }

}  // namespace

const Algorithm kStarAllreduce{
    .name = "star", .wire_id = 200, .serves = {CollKind::allreduce}, .run = run, .cost = predict, .min_ranks = 2};
KOLO_REGISTER_ALGORITHM(kStarAllreduce);

}  // namespace kolo::algo

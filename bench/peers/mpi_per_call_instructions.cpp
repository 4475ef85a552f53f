// kolo-per-call-instructions for Open MPI: the same calls (bench/micro/per_call_instructions.cpp),
// batched and staggered the same way, through MPI_Gather, MPI_Scatter, MPI_Bcast, MPI_Reduce and
// MPI_Allreduce, so that scripts/per-call-instructions.sh --versus-mpi can set the two side by
// side under callgrind (collecting inside measure() only).
//   mpirun -np 2 kolo-per-call-instructions-mpi gather|scatter|broadcast|reduce|allreduce ITERATIONS
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {
enum Op { kAllreduce, kBroadcast, kGather, kScatter, kReduce, kNumOps };
const char* const kNames[kNumOps] = {"allreduce", "broadcast", "gather", "scatter", "reduce"};
}  // namespace

extern "C" __attribute__((noinline)) void measure(int n, int which, float* x, int p) {
  for (int i = 0; i < n; ++i) {
    switch (which) {
      case kAllreduce: MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
      case kBroadcast: MPI_Bcast(x, 1, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
      case kGather: MPI_Gather(x, 2, MPI_FLOAT, x + 2, 2, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
      case kScatter: MPI_Scatter(x, 2, MPI_FLOAT, x + 2 * p, 2, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
      default: MPI_Reduce(x, x + 2, 2, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    }
  }
}

int main(int argc, char** argv) {
  int which = 0;
  while (argc == 3 && which < kNumOps && std::strcmp(argv[1], kNames[which]) != 0) ++which;
  if (argc != 3 || which == kNumOps) {
    std::fprintf(stderr, "usage: kolo-per-call-instructions-mpi gather|scatter|broadcast|reduce|allreduce ITERATIONS\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  const int n = std::atoi(argv[2]);
  int p = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (p > 8) {
    std::fprintf(stderr, "kolo-per-call-instructions-mpi: at most 8 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  float x[64] = {};
  for (int i = 0; i < 200; ++i) MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const bool from_root = which == kBroadcast || which == kScatter, to_root = which == kGather || which == kReduce;
  if (p > 1 && (from_root || to_root)) {
    constexpr int kBatch = 16;  // as kolo-per-call-instructions: the receivers sleep, the messages wait for them
    const bool receives = from_root ? rank != 0 : rank == 0;
    for (int done = 0; done < n; done += kBatch) {
      const int batch = std::min(kBatch, n - done);
      MPI_Barrier(MPI_COMM_WORLD);
      if (receives) std::this_thread::sleep_for(std::chrono::milliseconds(10 * (rank + 1)));
      measure(batch, which, x, p);
    }
  } else {
    measure(n, which, x, p);
  }
  MPI_Finalize();
  return 0;
}

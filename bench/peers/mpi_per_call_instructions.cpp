// kolo-per-call-instructions for Open MPI: the same calls (bench/micro/per_call_instructions.cpp),
// batched and staggered the same way, through MPI_Gather, MPI_Scatter, MPI_Bcast, MPI_Reduce and
// MPI_Allreduce, so that scripts/bench/per-call-instructions.sh --versus-mpi can set the two side by
// side under callgrind (collecting inside measure() only).
//   mpirun -np 2 kolo-per-call-instructions-mpi gather|scatter|broadcast|reduce|allreduce ITERATIONS
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "per_call_driver.hpp"

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
  int code = 0;
  const auto args = kolo::bench::parse_per_call_cli(
      argc, argv, "kolo-per-call-instructions-mpi",
      "usage: mpirun -np P kolo-per-call-instructions-mpi OPERATION ITERATIONS\n",
      "kolo-per-call-instructions for Open MPI: ITERATIONS calls inside measure(), for callgrind.",
      std::vector<std::string>(kNames, kNames + kNumOps), code);
  if (!args) return code;
  const int which = args->operation;
  MPI_Init(&argc, &argv);
  int p = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (p > 8) {
    std::fprintf(stderr, "kolo-per-call-instructions-mpi: at most 8 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  float x[64] = {};
  for (int i = 0; i < 200; ++i) MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  kolo::bench::run_per_call(
      args->iterations, rank, p, which == kBroadcast || which == kScatter, which == kGather || which == kReduce,
      [] { MPI_Barrier(MPI_COMM_WORLD); }, [&](int count) { measure(count, which, x, p); });
  MPI_Finalize();
  return 0;
}

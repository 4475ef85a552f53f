// kolo-per-call-instructions for Open MPI: the same calls (bench/micro/per_call_instructions.cpp),
// batched and staggered the same way, through MPI_Gather, MPI_Scatter, MPI_Bcast, MPI_Reduce and
// MPI_Allreduce, so that scripts/bench/per-call-instructions.sh --versus-mpi can set the two side by
// side under callgrind (collecting inside measure() only).
//   mpirun -np 2 kolo-per-call-instructions-mpi gather|scatter|broadcast|reduce|allreduce ITERATIONS
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"  // common/: the programs' shared CLI11 setup

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
  std::string op;
  int n = 0;
  bool help = false;
  CLI::App app{"", "kolo-per-call-instructions-mpi"};
  kolo::cli::configure(app, "usage: mpirun -np P kolo-per-call-instructions-mpi OPERATION ITERATIONS\n");
  app.description("kolo-per-call-instructions for Open MPI: ITERATIONS calls inside measure(), for callgrind.");
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
    std::fprintf(stderr, "kolo-per-call-instructions-mpi: %s\n%s", e.what(), kolo::cli::help(app).c_str());
    return 2;
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    return 0;
  }
  const int which = static_cast<int>(std::find(kNames, kNames + kNumOps, op) - kNames);
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

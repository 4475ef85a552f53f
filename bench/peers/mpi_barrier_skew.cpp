// kolo-bench-barrier-mpi: kolo-bench-barrier (bench/micro/barrier_skew.cpp) for Open MPI's
// MPI_Barrier and MPI_Bcast, the same steps and the same report.
//   mpirun -np 4 kolo-bench-barrier-mpi [--iters N] [--rows R]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "barrier_skew.hpp"

int main(int argc, char** argv) {
  using kolo::bench::now_us;
  kolo::bench::SkewArgs args;
  if (!kolo::bench::parse_skew_args(argc, argv, "mpirun -np P kolo-bench-barrier-mpi", &args)) return 2;
  const int iters = args.iters, rows = args.rows;
  constexpr int kPerRow = kolo::bench::kSkewPerRow, kSkip = kolo::bench::kSkewSkip;
  MPI_Init(&argc, &argv);
  int P = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);

  for (int w = 0; w < 200; ++w) MPI_Barrier(MPI_COMM_WORLD);
  std::vector<double> runs;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now_us();
    for (int i = 0; i < iters; ++i) MPI_Barrier(MPI_COMM_WORLD);
    runs.push_back((now_us() - t0) / iters);
  }
  double latency = kolo::bench::median_of(runs), slowest = 0;
  MPI_Allreduce(&latency, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (me == 0)
    std::printf("# Open MPI, %d ranks: barrier %.3f us (median of 5 runs of %d back to back, slowest rank)\n", P, slowest,
                iters);

  float value[2] = {1, 2};
  std::vector<kolo::bench::SkewRow> mine(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    for (int w = 0; w < kPerRow; ++w) MPI_Bcast(value, 2, MPI_FLOAT, 0, MPI_COMM_WORLD);
    kolo::bench::SkewRow& row = mine[static_cast<size_t>(r)];
    row.enter = now_us();
    MPI_Barrier(MPI_COMM_WORLD);
    row.exit = now_us();
    for (int i = 0; i < kPerRow; ++i) {
      MPI_Bcast(value, 2, MPI_FLOAT, 0, MPI_COMM_WORLD);
      if (i == 0) row.first_done = now_us();
    }
    row.last_done = now_us();
  }
  const int n = rows * kolo::bench::kSkewFields;
  std::vector<double> all(static_cast<size_t>(n) * static_cast<size_t>(P));
  MPI_Allgather(mine.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, MPI_COMM_WORLD);
  if (me == 0) kolo::bench::print_skew("Open MPI", P, rows, kSkip, kPerRow, all);
  MPI_Finalize();
  return 0;
}

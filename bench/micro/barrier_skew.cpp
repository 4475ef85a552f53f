// kolo-bench-barrier: how long a barrier takes and in which order the ranks leave it.
//   kolorun -n 4 kolo-bench-barrier [--iters N] [--rows R]
//   (KOLO_ALGO=barrier=dissemination or =central to compare the algorithms)
// First the latency: N back-to-back barriers (default 300), five times; rank 0 prints the
// median run's time per barrier on the slowest rank. Then R rows (default 400) of what a
// benchmark row does: 20 broadcasts of 8 bytes from rank 0 (warm-up), a barrier, 20 timed
// broadcasts; rank 0 prints, per rank, when it entered and left the barrier and when its first
// and last broadcast completed (bench/common/barrier_skew.hpp). kolo-bench-barrier-mpi
// (bench/peers) prints the same for Open MPI's barrier and broadcast.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "barrier_skew.hpp"
#include "kolo/kolo.hpp"

int main(int argc, char** argv) {
  using namespace kolo;
  kolo::bench::SkewArgs args;
  if (!kolo::bench::parse_skew_args(argc, argv, "kolorun -n P kolo-bench-barrier", &args)) return 2;
  const int iters = args.iters, rows = args.rows;
  constexpr int kPerRow = kolo::bench::kSkewPerRow, kSkip = kolo::bench::kSkewSkip;
  auto pg = init_from_env();
  const int P = pg->size();

  for (int w = 0; w < 200; ++w) pg->barrier()->wait();
  std::vector<double> runs;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = bench::now_us();
    for (int i = 0; i < iters; ++i) pg->barrier()->wait();
    runs.push_back((bench::now_us() - t0) / iters);
  }
  double latency = bench::median_of(runs);
  AllreduceOptions slowest;
  slowest.op = ReduceKind::max;
  pg->allreduce(Buffer(&latency, 1), slowest)->wait();
  const char* algo = std::getenv("KOLO_ALGO");
  if (pg->rank() == 0)
    std::printf("# kolo (KOLO_ALGO=%s), %d ranks: barrier %.3f us (median of 5 runs of %d back to back, slowest rank)\n",
                algo != nullptr ? algo : "", P, latency, iters);

  float value[2] = {1, 2};
  BroadcastOptions from0;
  from0.root = 0;
  std::vector<bench::SkewRow> mine(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    for (int w = 0; w < kPerRow; ++w) pg->broadcast(Buffer(value, 2), from0)->wait();
    bench::SkewRow& row = mine[static_cast<size_t>(r)];
    row.enter = bench::now_us();
    pg->barrier()->wait();
    row.exit = bench::now_us();
    for (int i = 0; i < kPerRow; ++i) {
      pg->broadcast(Buffer(value, 2), from0)->wait();
      if (i == 0) row.first_done = bench::now_us();
    }
    row.last_done = bench::now_us();
  }
  const size_t n = mine.size() * bench::kSkewFields;
  std::vector<double> all(n * static_cast<size_t>(P));
  pg->allgather(Buffer(reinterpret_cast<double*>(mine.data()), n), Buffer(all.data(), all.size()))->wait();
  if (pg->rank() == 0) bench::print_skew("kolo", P, rows, kSkip, kPerRow, all);
  pg->barrier()->wait();
  return 0;
}

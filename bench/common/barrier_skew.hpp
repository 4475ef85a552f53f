// What kolo-bench-barrier and kolo-bench-barrier-mpi share (header-only, no libkolo): the
// per-row timestamps every rank records, and the report rank 0 prints from all of them.
//
// A benchmark row (kolo-perf's, nccl-tests') starts each rank's clock when that rank leaves a
// barrier. Which rank leaves first is the barrier algorithm's business, and it matters: a rank
// that leaves early waits, on its own clock, for a root that has not left yet. These numbers
// show it: per rank, when it left the barrier and when its first and last broadcast from rank 0
// completed, each relative to the earliest rank's exit.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli.hpp"  // common/: the programs' shared CLI11 setup

namespace kolo::bench {

// One row's timestamps of one rank, steady-clock microseconds.
struct SkewRow {
  double enter = 0, exit = 0, first_done = 0, last_done = 0;
};
constexpr int kSkewFields = 4;

// Each row: kSkewPerRow broadcasts (warm-up), the barrier, kSkewPerRow timed broadcasts; the
// first kSkewSkip rows are left out of the report.
constexpr int kSkewPerRow = 20, kSkewSkip = 10;

struct SkewArgs {
  int iters = 300;  // --iters: back-to-back barriers per latency run
  int rows = 400;   // --rows
};
// False, with the reason and the help on stderr, for a bad command line (an unknown flag, a
// value out of range); -h/--help prints the help and exits 0. `usage`: how the program is run.
inline bool parse_skew_args(int argc, char** argv, const char* usage, SkewArgs* a) {
  CLI::App app{"", argv[0]};
  bool help = false;
  kolo::cli::configure(app, std::string("usage: ") + usage + " [--iters N] [--rows R]\n");
  app.add_option("--iters", a->iters, "back-to-back barriers per latency run, >= 1 (300)")->type_name("N");
  app.add_option("--rows", a->rows, "rows of (broadcasts, barrier, broadcasts), > " + std::to_string(kSkewSkip) + " (400)")
      ->type_name("R");
  kolo::cli::add_help(app, help);
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "%s\n%s", e.what(), kolo::cli::help(app).c_str());
    return false;
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    std::exit(0);
  }
  if (a->iters >= 1 && a->rows > kSkewSkip) return true;
  std::fprintf(stderr, "need --iters >= 1 and --rows > %d\n%s", kSkewSkip, kolo::cli::help(app).c_str());
  return false;
}

inline double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `all`: every rank's rows, rank-major (ranks x rows x kSkewFields doubles), as an all-gather
// of each rank's SkewRow array leaves them. The first `skip` rows are left out (warm-up).
inline void print_skew(const char* library, int ranks, int rows, int skip, int per_row, const std::vector<double>& all) {
  auto at = [&](int rank, int row) { return reinterpret_cast<const SkewRow*>(all.data())[static_cast<size_t>(rank) * rows + row]; };
  std::printf("# %s, %d ranks: per rank, medians over %d rows of (barrier; %d broadcasts of 8 B from rank 0), "
              "us after the first rank left the barrier\n", library, ranks, rows - skip, per_row);
  std::printf("# %4s %12s %12s %12s %12s %16s\n", "rank", "entered", "left", "first done", "last done", "us/broadcast");
  double sum_per_op = 0;
  for (int k = 0; k < ranks; ++k) {
    std::vector<double> en, ex, fi, la, per;
    for (int r = skip; r < rows; ++r) {
      double first_enter = at(0, r).enter, first_exit = at(0, r).exit;
      for (int j = 1; j < ranks; ++j) {
        first_enter = std::min(first_enter, at(j, r).enter);
        first_exit = std::min(first_exit, at(j, r).exit);
      }
      const SkewRow q = at(k, r);
      en.push_back(q.enter - first_enter);
      ex.push_back(q.exit - first_exit);
      fi.push_back(q.first_done - first_exit);
      la.push_back(q.last_done - first_exit);
      per.push_back((q.last_done - q.exit) / per_row);  // what a benchmark row times on this rank
    }
    const double per_op = median_of(per);
    sum_per_op += per_op;
    std::printf("  %4d %12.2f %12.2f %12.2f %12.2f %16.3f\n", k, median_of(en), median_of(ex), median_of(fi), median_of(la), per_op);
  }
  std::printf("# average over ranks (kolo-perf's -a 1): %.3f us per broadcast\n", sum_per_op / ranks);
}

}  // namespace kolo::bench

// What every benchmark program prints and writes: nccl-tests' table on stdout, line for line in
// its format (preamble, header, one row per size with out-of-place then in-place columns, footer,
// nccl-tests 2.19's src/util.cu), nccl-tests' -J document (nccl_json.hpp), and kolo's own rows
// as JSON (--json) and CSV (--csv). Only rank 0 makes a Reporter that prints.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common_options.hpp"

namespace kolo::bench {

struct RankDescription {
  int rank = 0;
  int pid = 0;
  std::string host;
  int local_index = 0;  // the "device" column: this rank's place among the ranks of its host
  // -g 1: the rank's CUDA device (device_memory.hpp's DeviceInfo); -1 and empty: host memory.
  int device = -1;
  std::string device_pci = {};     // "0000:1b:00", nccl-tests' bracketed field
  std::string device_bus_id = {};  // "0000:1B:00.0"
  std::string device_name = {};    // "NVIDIA H200"
};

// Who measured: written into every JSON/CSV row so files of kolo and peers can be merged.
struct RunIdentity {
  std::string program;  // "kolo-perf", "kolo-perf-mpi", ...
  std::string library;  // "kolo 0.1.0 transport auto algo auto", "Open MPI v4.1.4", ...
  int nranks = 0;
};

// -I 1: every timed iteration, in microseconds.
struct PerIteration {
  std::vector<double> times_us;                     // per iteration, the maximum over the ranks
  std::vector<std::vector<double>> per_process_us;  // rank by rank (nccl-tests' process rows)
};

// nccl-tests' per-iteration summary of times_us past the skipped ones (its computeIterStats).
struct IterStats {
  double min = 0, max = 0, avg = 0, p50 = 0, p95 = 0, p99 = 0, stdev = 0, cv_pct = 0;
};
IterStats iter_stats(const std::vector<double>& times_us, int skip);

// One measured column group of one row.
struct Measurement {
  std::string collective;
  size_t size_bytes = 0;  // max(send, recv) bytes, the "size" column
  size_t count = 0;       // per-rank count passed to the collective
  std::string type;       // nccl-tests' names: "float", "double", ...
  std::string redop;      // "sum", ..., "none" for data movement
  int root = -1;
  bool in_place = false;
  double time_us = 0;
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  int64_t wrong = -1;     // -1: not checked
  PerIteration per_iter;  // -I 1 only
};

class Reporter {
 public:
  // printing: this rank prints the table and writes the files (rank 0).
  Reporter(bool printing, RunIdentity identity, const CommonOptions& options);
  // A run that ends in an exception still leaves a complete -J document, with the rows measured
  // so far and an "errors" entry, as nccl-tests finalizes its file on the way out.
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // device_tag: the device name on each rank's line ("[kolo] algo auto transport tcp").
  void preamble(const std::vector<RankDescription>& ranks, const std::string& device_tag);
  void begin_row(const std::string& collective, size_t size_bytes, size_t count, const std::string& type,
                 const std::string& redop, int root);
  // per_iter: -I 1's times (nullptr otherwise), printed as i_min, i_max, i_p99, i_cv%.
  void measurement(bool in_place, double time_us, double algbw_gbs, double busbw_gbs, int64_t wrong,
                   const PerIteration* per_iter = nullptr);
  // Ends the printed line; also after an exception, so the error text starts on its own line.
  void end_row();

  int64_t total_wrong() const { return total_wrong_; }
  double average_busbw() const;  // over every column group, as nccl-tests' footer
  // Prints the footer, writes -J/--json/--csv, and returns the exit status: kExitTestFailure (7,
  // nccl-tests' testNumResults) on any wrong element or an average bus bandwidth below 0.9 x the
  // floor, else kExitOk. Throws std::runtime_error when a file cannot be written.
  int finish();

  const std::vector<Measurement>& rows() const { return rows_; }

 private:
  void write_json(const std::string& path) const;
  void write_csv(const std::string& path) const;

  bool printing_;
  RunIdentity identity_;
  std::string nccl_json_path_;  // -J, once claimed ("" when not written, or once written)
  std::string start_time_;
  std::vector<RankDescription> ranks_;
  std::string device_tag_;
  const CommonOptions& o_;
  Measurement current_;
  std::vector<Measurement> rows_;
  int64_t total_wrong_ = 0;
  double busbw_sum_ = 0;
  int busbw_count_ = 0;
};

// Exit status for a finished run (see Reporter::finish).
int exit_status(int64_t total_wrong, double average_busbw, double min_bw);

// nccl-tests' getFloatStr: `value` in `width` characters, with 2, 1 or 0 decimals, whichever
// fits first, else in exponent notation (so 1234.5 GB/s prints as "1234.5", not a wider column).
std::string fixed_width(double value, int width);

}  // namespace kolo::bench

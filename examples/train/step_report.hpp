// What rank 0 prints: one line per optimizer step, and the end-of-run summary, from timings
// collected on the way. Pure formatting and bookkeeping, no I/O.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kolo::train {

struct StepRecord {
  uint64_t step = 0;        // 1-based
  uint64_t total_steps = 0;
  double loss = 0;          // mean over the global batch
  double lr = 0;
  double grad_norm = 0;     // before clipping
  double seconds = 0;       // wall time of the whole step on this rank
  uint64_t tokens = 0;      // tokens of the global batch
  double comm_seconds = 0;  // DDP: sum of bucket all-reduce times (start..completion)
  double exposed_seconds = 0;  // DDP: time finish() blocked, i.e. communication not hidden by backward
};

// The share of communication time that overlapped backward, in [0, 1]; 1 when nothing was sent.
double hidden_fraction(double comm_seconds, double exposed_seconds);

// "step 12 loss 5.12345678 lr 1.00e-03 norm 0.812 tok/s 10240 eta 0:35 comm 1.20ms exposed 0.30ms hidden 75%"
// (the loss with 9 significant digits: exact for a float, so runs can be compared bitwise).
std::string format_step_line(const StepRecord& record, double eta_seconds);

// Accumulates step records for the ETA and the summary. The first step is left out of the means
// (it pays for first-touch page faults and thread start-up).
class RunStats {
 public:
  void add(const StepRecord& record);
  // Seconds the remaining steps should take at the mean pace so far.
  double eta_seconds(uint64_t steps_done, uint64_t total_steps) const;
  uint64_t measured_steps() const { return steps_; }
  double mean_step_seconds() const;
  double tokens_per_second() const;  // of all ranks together
  double mean_comm_seconds() const;
  double mean_exposed_seconds() const;

 private:
  bool skipped_first_ = false;
  StepRecord first_;
  uint64_t steps_ = 0;
  uint64_t tokens_ = 0;
  double seconds_ = 0, comm_ = 0, exposed_ = 0;
};

// "tokens/s 123456" and the weak-scaling line:
// "summary ranks 2 local_batch 16 accum 1 seq 64 params 120000 steps 200 mean_step_ms 45.1
//  tokens_per_s_per_rank 11350 comm_ms 3.2 exposed_ms 0.8 allreduce_hidden 0.75"
// local_batch: samples per rank per micro-batch, as text ("16", or "5-6" for uneven shares).
std::string format_summary(const RunStats& stats, int ranks, const std::string& local_batch, int accum, int seq, size_t params);

// "1:05" or "1:02:03".
std::string format_duration(double seconds);

}  // namespace kolo::train

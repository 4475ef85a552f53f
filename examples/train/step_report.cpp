#include "step_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kolo::train {

double hidden_fraction(double comm_seconds, double exposed_seconds) {
  if (comm_seconds <= 0) return 1.0;
  return std::clamp(1.0 - exposed_seconds / comm_seconds, 0.0, 1.0);
}

std::string format_duration(double seconds) {
  long long s = std::llround(std::max(0.0, seconds));
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  return text;
}

std::string format_step_line(const StepRecord& r, double eta_seconds) {
  char line[320];
  const double tokens_per_second = r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0;
  std::snprintf(line, sizeof line,
                "step %llu loss %.9g lr %.3e norm %.6g tok/s %.0f eta %s comm %.2fms exposed %.2fms hidden %.0f%%",
                static_cast<unsigned long long>(r.step), r.loss, r.lr, r.grad_norm, tokens_per_second,
                format_duration(eta_seconds).c_str(), r.comm_seconds * 1e3, r.exposed_seconds * 1e3,
                100.0 * hidden_fraction(r.comm_seconds, r.exposed_seconds));
  return line;
}

void RunStats::add(const StepRecord& r) {
  if (!skipped_first_) {
    skipped_first_ = true;
    first_ = r;
    return;
  }
  ++steps_;
  tokens_ += r.tokens;
  seconds_ += r.seconds;
  comm_ += r.comm_seconds;
  exposed_ += r.exposed_seconds;
}

double RunStats::mean_step_seconds() const {
  if (steps_ == 0) return first_.seconds;
  return seconds_ / static_cast<double>(steps_);
}

double RunStats::eta_seconds(uint64_t steps_done, uint64_t total_steps) const {
  return steps_done >= total_steps ? 0 : mean_step_seconds() * static_cast<double>(total_steps - steps_done);
}

double RunStats::tokens_per_second() const {
  if (steps_ == 0) return first_.seconds > 0 ? static_cast<double>(first_.tokens) / first_.seconds : 0;
  return seconds_ > 0 ? static_cast<double>(tokens_) / seconds_ : 0;
}

double RunStats::mean_comm_seconds() const {
  return steps_ == 0 ? first_.comm_seconds : comm_ / static_cast<double>(steps_);
}

double RunStats::mean_exposed_seconds() const {
  return steps_ == 0 ? first_.exposed_seconds : exposed_ / static_cast<double>(steps_);
}

std::string format_summary(const RunStats& stats, int ranks, const std::string& local_batch, int accum, int seq, size_t params) {
  char line[512];
  std::snprintf(line, sizeof line,
                "summary ranks %d local_batch %s accum %d seq %d params %zu steps %llu mean_step_ms %.2f "
                "tokens_per_s_per_rank %.0f comm_ms %.3f exposed_ms %.3f allreduce_hidden %.3f",
                ranks, local_batch.c_str(), accum, seq, params, static_cast<unsigned long long>(stats.measured_steps()),
                stats.mean_step_seconds() * 1e3, stats.tokens_per_second() / ranks, stats.mean_comm_seconds() * 1e3,
                stats.mean_exposed_seconds() * 1e3,
                hidden_fraction(stats.mean_comm_seconds(), stats.mean_exposed_seconds()));
  return line;
}

}  // namespace kolo::train

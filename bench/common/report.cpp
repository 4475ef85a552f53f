#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "nccl_json.hpp"
#include "usage_error.hpp"

namespace kolo::bench {
namespace {

// A CSV number with enough digits to recompute ratios ("null" for inf/nan).
std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::ofstream open_for_writing(const std::string& path) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write '" + path + "'");
  return f;
}

}  // namespace

int exit_status(int64_t total_wrong, double average_busbw, double min_bw) {
  if (total_wrong != 0) return kExitTestFailure;
  // nccl-tests' tolerance: NCCL_TESTS_MIN_BW fails a run only below 90% of the floor.
  if (min_bw > 0 && average_busbw < min_bw * 0.9) return kExitTestFailure;
  return kExitOk;
}

std::string fixed_width(double value, int width) {
  char text[64];
  for (const char* format : {"%*.2f", "%*.1f", "%*.0f"}) {
    if (std::snprintf(text, sizeof text, format, width, value) <= width) return text;
  }
  std::snprintf(text, sizeof text, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return std::string(text).substr(0, static_cast<size_t>(width));
}

IterStats iter_stats(const std::vector<double>& times_us, int skip) {
  IterStats st;
  if (skip < 0 || static_cast<size_t>(skip) >= times_us.size()) return st;
  std::vector<double> sorted(times_us.begin() + skip, times_us.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  // nccl-tests' nearest-rank percentile: the ceil(n p / 100)-th smallest.
  const auto percentile = [&](size_t p) { return sorted[std::min(n - 1, (n * p + 99) / 100 - 1)]; };
  st.min = sorted.front();
  st.max = sorted.back();
  st.p50 = sorted[n / 2];
  st.p95 = percentile(95);
  st.p99 = percentile(99);
  double sum = 0;
  for (const double t : sorted) sum += t;
  st.avg = sum / static_cast<double>(n);
  double var = 0;
  for (const double t : sorted) var += (t - st.avg) * (t - st.avg);
  st.stdev = std::sqrt(var / static_cast<double>(n));
  st.cv_pct = st.avg > 0 ? st.stdev / st.avg * 100.0 : 0.0;
  return st;
}

Reporter::Reporter(bool printing, RunIdentity identity, const CommonOptions& options)
    : printing_(printing), identity_(std::move(identity)), o_(options) {}

Reporter::~Reporter() {
  if (nccl_json_path_.empty()) return;  // not asked for, or finish() wrote it
  try {
    write_nccl_json(nccl_json_path_, {&o_, start_time_, ranks_, device_tag_, &rows_, total_wrong_, average_busbw(),
                                      o_.min_bw, {"the run ended before its last row; the error is on stderr"}});
  } catch (...) {
    // Already failing: the error that ended the run is the one to report.
  }
}

void Reporter::preamble(const std::vector<RankDescription>& ranks, const std::string& device_tag) {
  start_time_ = now_text();
  ranks_ = ranks;
  device_tag_ = "cpu " + device_tag;
  // The "device" column: a rank's place among the ranks on its host, as nccl-tests' local rank.
  for (RankDescription& r : ranks_) {
    r.local_index = 0;
    for (const RankDescription& before : ranks_) {
      if (before.rank < r.rank && before.host == r.host) r.local_index++;
    }
  }
  if (!printing_) return;
  if (!o_.output_file.empty()) {
    std::string line;
    nccl_json_path_ = claim_json_path(o_.output_file, line);
    if (!line.empty()) std::printf("%s\n", line.c_str());
  }
  const std::string program = program_of_collective(o_.collective);
  std::printf("# nccl-tests version 2.19.6 nccl-headers=0 nccl-library=0 (output format only: %s, %s)\n",
              identity_.program.c_str(), identity_.library.c_str());
  std::printf("# Collective test starting: %s\n", program.c_str());
  const bool by_factor = o_.step_factor > 1;
  std::printf(
      "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: 0 unalign: %d\n",
      o_.min_bytes, o_.max_bytes, by_factor ? o_.step_factor : o_.step_bytes, by_factor ? "factor" : "bytes",
      o_.warmup_iters, o_.iters, o_.agg_iters, o_.check_iters, o_.unalign);
  switch (o_.blocking_mode) {
    case Blocking::wait_barrier:
      std::printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
      break;
    case Blocking::wait:
      std::printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
      break;
    case Blocking::wait_barrier_untimed:
      std::printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n");
      break;
    case Blocking::none:
      break;
  }
  if (o_.per_iter_timing) {
    std::printf("# Per-Iteration Report: CPU clock timing, each iteration waited for; i_* uses max over process rows");
    if (o_.per_iter_skip != 0) std::printf("; summary skips first %d iterations", o_.per_iter_skip);
    std::printf(" \n");
  }
  for (const std::string& note : o_.notes) std::printf("# %s\n", note.c_str());
  std::printf("#\n# Using devices\n");
  for (const RankDescription& r : ranks_) {
    // -g 1: nccl-tests' line for a GPU, its CUDA index, PCI address and name.
    if (r.device >= 0) {
      std::printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", r.rank, 0, r.pid, r.host.c_str(),
                  r.device, r.device_pci.c_str(), r.device_name.c_str());
    } else {
      std::printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [0000:00:00] %s\n", r.rank, 0, r.pid,
                  r.host.c_str(), r.local_index, device_tag_.c_str());
    }
  }
  const char* time_label = o_.report_cputime ? "cputime" : "time";
  const int stamp_pad = o_.report_timestamps ? 19 : 0;
  const char* stamp_label = o_.report_timestamps ? "timestamp" : "";
  const char* stamp_format = o_.report_timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  std::printf("#\n");
  if (o_.per_iter_timing) {
    std::printf("# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n",
                "", "", "", "", "");
    const char* row = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s %*s\n";
    std::printf(row, "size", "count", "type", "redop", "root", time_label, "algbw", "busbw", "#wrong", "i_min", "i_max",
                "i_p99", "i_cv%", time_label, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", stamp_pad,
                stamp_label);
    std::printf(row, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
                "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", stamp_pad, stamp_format);
  } else {
    std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
                "", "", "");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
                "redop", "root", time_label, "algbw", "busbw", "#wrong", time_label, "algbw", "busbw", "#wrong",
                stamp_pad, stamp_label);
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", stamp_pad, stamp_format);
  }
  std::fflush(stdout);
}

void Reporter::begin_row(const std::string& collective, size_t size_bytes, size_t count, const std::string& type,
                         const std::string& redop, int root) {
  current_ = Measurement{};
  current_.collective = collective;
  current_.size_bytes = size_bytes;
  current_.count = count;
  current_.type = type;
  current_.redop = redop;
  current_.root = root;
  if (printing_) std::printf("%12zu  %12zu  %8s  %6s  %6i", size_bytes, count, type.c_str(), redop.c_str(), root);
}

void Reporter::measurement(bool in_place, double time_us, double algbw_gbs, double busbw_gbs, int64_t wrong,
                           const PerIteration* per_iter) {
  Measurement m = current_;
  if (per_iter != nullptr) m.per_iter = *per_iter;
  m.in_place = in_place;
  m.time_us = time_us;
  m.algbw_gbs = algbw_gbs;
  m.busbw_gbs = busbw_gbs;
  m.wrong = wrong;
  rows_.push_back(m);
  busbw_sum_ += busbw_gbs;
  busbw_count_++;
  if (wrong > 0) total_wrong_ += wrong;
  if (!printing_) return;
  const std::string time_text = fixed_width(time_us, 7);
  const std::string algbw_text = fixed_width(algbw_gbs, 6);
  const std::string busbw_text = fixed_width(busbw_gbs, 6);
  if (wrong < 0) {
    std::printf("  %7s  %6s  %6s    N/A", time_text.c_str(), algbw_text.c_str(), busbw_text.c_str());
  } else {
    std::printf("  %7s  %6s  %6s  %6g", time_text.c_str(), algbw_text.c_str(), busbw_text.c_str(),
                static_cast<double>(wrong));
  }
  if (per_iter != nullptr) {
    const IterStats st = iter_stats(per_iter->times_us, o_.per_iter_skip);
    std::printf("  %7s  %7s  %7s  %7s", fixed_width(st.min, 7).c_str(), fixed_width(st.max, 7).c_str(),
                fixed_width(st.p99, 7).c_str(), fixed_width(st.cv_pct, 7).c_str());
  }
  if (in_place && o_.report_timestamps) std::printf("%21s", now_text().c_str());
}

void Reporter::end_row() {
  if (!printing_) return;
  std::printf("\n");
  std::fflush(stdout);
}

double Reporter::average_busbw() const { return busbw_count_ ? busbw_sum_ / busbw_count_ : 0.0; }

int Reporter::finish() {
  const double avg = average_busbw();
  const int status = exit_status(total_wrong_, avg, o_.min_bw);
  if (!printing_) return status;
  std::printf("# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(total_wrong_),
              total_wrong_ != 0 ? "FAILED" : "OK");
  // Like nccl-tests with NCCL_TESTS_MIN_BW: OK / FAILED after the value only when a floor is set.
  const char* verdict = o_.min_bw > 0 ? (avg < o_.min_bw * 0.9 ? "FAILED" : "OK") : "";
  std::printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg, verdict);
  std::printf("#\n");
  std::printf("# Collective test concluded: %s\n", program_of_collective(o_.collective).c_str());
  std::printf("#\n\n");
  if (o_.min_bw > 0 && avg < o_.min_bw * 0.9)
    std::fprintf(stderr, "%s: average bus bandwidth %g GB/s is below 90%% of the floor of %g GB/s\n",
                 identity_.program.c_str(), avg, o_.min_bw);
  if (status != kExitOk) {
    // nccl-tests' TESTCHECK line for a failed test, the one its users grep for.
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::printf(" .. %s pid %d: Test failure %s:%d\n", host, static_cast<int>(getpid()), "report.cpp", __LINE__);
  }
  std::fflush(stdout);
  if (!nccl_json_path_.empty()) {
    const std::string path = std::exchange(nccl_json_path_, std::string());
    write_nccl_json(path, {&o_, start_time_, ranks_, device_tag_, &rows_, total_wrong_, avg, o_.min_bw, {}});
  }
  if (!o_.json_path.empty()) write_json(o_.json_path);
  if (!o_.csv_path.empty()) write_csv(o_.csv_path);
  return status;
}

void Reporter::write_json(const std::string& path) const {
  // kolo's own row format (bench_verify.py, compare_report.py read it); one row per line so that
  // the file still greps well.
  using Json = nlohmann::ordered_json;
  const auto finite = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };  // JSON has no inf/nan
  Json head;
  head["program"] = identity_.program;
  head["library"] = identity_.library;
  head["collective"] = o_.collective;
  head["nranks"] = identity_.nranks;
  head["iters"] = o_.iters;
  head["warmup_iters"] = o_.warmup_iters;
  head["check"] = o_.check;
  head["blocking"] = o_.blocking;
  // Where the buffers were (-g 1: "device", and each rank's GPU), so host and GPU runs never mix.
  const bool gpu = !ranks_.empty() && ranks_.front().device >= 0;
  head["memory"] = gpu ? "device" : "host";
  if (gpu) {
    Json devices = Json::array();
    for (const RankDescription& r : ranks_)
      devices.push_back({{"rank", r.rank}, {"host", r.host}, {"device", r.device}, {"bus_id", r.device_bus_id},
                         {"name", r.device_name}});
    head["devices"] = devices;
  }
  head["total_wrong"] = total_wrong_;
  head["avg_busbw_gbs"] = finite(average_busbw());
  head["min_bw_gbs"] = finite(o_.min_bw);
  head["exit_status"] = exit_status(total_wrong_, average_busbw(), o_.min_bw);
  std::ofstream f = open_for_writing(path);
  const std::string text = head.dump(2);
  f << text.substr(0, text.rfind('\n')) << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Measurement& m = rows_[i];
    Json row;
    row["collective"] = m.collective;
    row["size_bytes"] = m.size_bytes;
    row["count"] = m.count;
    row["type"] = m.type;
    row["redop"] = m.redop;
    row["root"] = m.root;
    row["placement"] = m.in_place ? "in" : "out";
    row["time_us"] = finite(m.time_us);
    row["algbw_gbs"] = finite(m.algbw_gbs);
    row["busbw_gbs"] = finite(m.busbw_gbs);
    row["wrong"] = m.wrong < 0 ? Json(nullptr) : Json(m.wrong);
    f << (i ? "," : "") << "\n    " << row.dump();
  }
  f << "\n  ]\n}\n";
  if (!f.flush()) throw std::runtime_error("cannot write '" + path + "'");
}

void Reporter::write_csv(const std::string& path) const {
  std::ofstream f = open_for_writing(path);
  f << "program,library,nranks,collective,size_bytes,count,type,redop,root,placement,time_us,algbw_gbs,busbw_gbs,"
       "wrong\n";
  for (const Measurement& m : rows_) {
    f << csv_field(identity_.program) << ',' << csv_field(identity_.library) << ',' << identity_.nranks << ','
      << m.collective << ',' << m.size_bytes << ',' << m.count << ',' << m.type << ',' << m.redop << ',' << m.root
      << ',' << (m.in_place ? "in" : "out") << ',' << number(m.time_us) << ',' << number(m.algbw_gbs) << ','
      << number(m.busbw_gbs) << ',' << (m.wrong < 0 ? std::string() : std::to_string(m.wrong)) << '\n';
  }
  if (!f.flush()) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace kolo::bench

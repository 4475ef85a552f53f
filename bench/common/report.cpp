#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "usage_error.hpp"

namespace kolo::bench {
namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A finite number with enough digits to recompute ratios; JSON has no inf/nan.
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
  if (total_wrong != 0) return kExitWrongResults;
  if (min_bw > 0 && average_busbw < min_bw) return kExitBelowMinBw;
  return kExitOk;
}

Reporter::Reporter(bool printing, RunIdentity identity, const CommonOptions& options)
    : printing_(printing), identity_(std::move(identity)), o_(options) {}

void Reporter::preamble(const std::vector<RankDescription>& ranks, const std::string& device_tag) {
  if (!printing_) return;
  std::printf("# %s, %s (nccl-tests compatible output)\n", identity_.program.c_str(), identity_.library.c_str());
  std::printf("# Collective test starting: %s\n", o_.collective.c_str());
  const bool by_factor = o_.step_factor > 1;
  std::printf(
      "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: 1 "
      "validation: %d graph: 0\n",
      o_.min_bytes, o_.max_bytes, by_factor ? o_.step_factor : o_.step_bytes, by_factor ? "factor" : "bytes",
      o_.warmup_iters, o_.iters, o_.check ? 1 : 0);
  std::printf("#\n# Using devices\n");
  for (const RankDescription& r : ranks) {
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s device cpu %s\n", r.rank, r.pid, r.host.c_str(),
                device_tag.c_str());
  }
  std::printf("#\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
              "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type",
              "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "",
              "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void Reporter::begin_row(const std::string& collective, size_t size_bytes, size_t count, const std::string& type,
                         const std::string& redop, int root) {
  current_ = Measurement{collective, size_bytes, count, type, redop, root};
  if (printing_) std::printf("%12zu  %12zu  %8s  %6s  %6i", size_bytes, count, type.c_str(), redop.c_str(), root);
}

void Reporter::measurement(bool in_place, double time_us, double algbw_gbs, double busbw_gbs, int64_t wrong) {
  Measurement m = current_;
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
  // nccl-tests keeps the time column 7 wide by dropping decimals as the value grows.
  char time_text[32];
  if (time_us >= 10000.0) {
    std::snprintf(time_text, sizeof time_text, "%7.0f", time_us);
  } else if (time_us >= 100.0) {
    std::snprintf(time_text, sizeof time_text, "%7.1f", time_us);
  } else {
    std::snprintf(time_text, sizeof time_text, "%7.2f", time_us);
  }
  if (wrong < 0) {
    std::printf("  %7s  %6.2f  %6.2f  %5s", time_text, algbw_gbs, busbw_gbs, "N/A");
  } else {
    std::printf("  %7s  %6.2f  %6.2f  %5g", time_text, algbw_gbs, busbw_gbs, static_cast<double>(wrong));
  }
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
  const char* verdict = o_.min_bw > 0 ? (avg < o_.min_bw ? "FAILED" : "OK") : "";
  std::printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg, verdict);
  if (o_.min_bw > 0 && avg < o_.min_bw)
    std::printf("# Average bus bandwidth %g GB/s is below the floor of %g GB/s (--min-bw / KOLO_PERF_MIN_BW)\n", avg,
                o_.min_bw);
  std::printf("#\n");
  std::printf("# Collective test concluded: %s\n", o_.collective.c_str());
  std::fflush(stdout);
  if (!o_.json_path.empty()) write_json(o_.json_path);
  if (!o_.csv_path.empty()) write_csv(o_.csv_path);
  return status;
}

void Reporter::write_json(const std::string& path) const {
  std::ofstream f = open_for_writing(path);
  f << "{\n  \"program\": " << json_string(identity_.program) << ",\n  \"library\": " << json_string(identity_.library)
    << ",\n  \"collective\": " << json_string(o_.collective) << ",\n  \"nranks\": " << identity_.nranks
    << ",\n  \"iters\": " << o_.iters << ",\n  \"warmup_iters\": " << o_.warmup_iters
    << ",\n  \"check\": " << (o_.check ? "true" : "false") << ",\n  \"blocking\": " << (o_.blocking ? "true" : "false")
    << ",\n  \"total_wrong\": " << total_wrong_ << ",\n  \"avg_busbw_gbs\": " << number(average_busbw())
    << ",\n  \"min_bw_gbs\": " << number(o_.min_bw)
    << ",\n  \"exit_status\": " << exit_status(total_wrong_, average_busbw(), o_.min_bw) << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Measurement& m = rows_[i];
    f << (i ? "," : "") << "\n    {\"collective\": " << json_string(m.collective) << ", \"size_bytes\": " << m.size_bytes
      << ", \"count\": " << m.count << ", \"type\": " << json_string(m.type) << ", \"redop\": " << json_string(m.redop)
      << ", \"root\": " << m.root << ", \"placement\": \"" << (m.in_place ? "in" : "out") << "\""
      << ", \"time_us\": " << number(m.time_us) << ", \"algbw_gbs\": " << number(m.algbw_gbs)
      << ", \"busbw_gbs\": " << number(m.busbw_gbs) << ", \"wrong\": " << (m.wrong < 0 ? "null" : std::to_string(m.wrong))
      << "}";
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

#include "nccl_json.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

extern char** environ;

namespace kolo::bench {
namespace {

using Json = nlohmann::ordered_json;  // nccl-tests' key order, for readers that diff files

// nccl-tests' jsonBool writes a string, and its jsonDouble writes NaN as the string "nan".
Json flag(bool v) { return v ? "true" : "false"; }
Json real(double v) { return std::isnan(v) ? Json("nan") : Json(v); }

bool is_json_name(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && slash > dot) || dot + 1 == path.size()) return false;
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "json";
}

// The environment as nccl-tests records it, except values that are credentials.
Json environment() {
  Json list = Json::array();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name.find("SECRET") != std::string::npos || name.find("TOKEN") != std::string::npos ||
        name.find("PASSWORD") != std::string::npos)
      entry = name + "=<redacted>";
    list.push_back(entry);
  }
  return list;
}

Json placement(const Measurement& m, bool cputime) {
  Json p;
  p[cputime ? "cpu_time" : "time"] = real(m.time_us);
  p["alg_bw"] = real(m.algbw_gbs);
  p["bus_bw"] = real(m.busbw_gbs);
  p["nwrong"] = m.wrong < 0 ? Json(nullptr) : Json(static_cast<double>(m.wrong));
  return p;
}

// nccl-tests' writePerIterReport object.
Json per_iteration(const PerIteration& p, int skip) {
  const IterStats st = iter_stats(p.times_us, skip);
  Json j;
  j["skipped_iterations"] = skip;
  j["min_us"] = real(st.min);
  j["max_us"] = real(st.max);
  j["avg_us"] = real(st.avg);
  j["p50_us"] = real(st.p50);
  j["p95_us"] = real(st.p95);
  j["p99_us"] = real(st.p99);
  j["stdev_us"] = real(st.stdev);
  j["cv_pct"] = real(st.cv_pct);
  j["times_us"] = p.times_us;
  if (p.per_process_us.size() > 1) j["per_process_max_times_us"] = p.per_process_us;
  return j;
}

}  // namespace

std::string claim_json_path(const std::string& path, std::string& line) {
  line.clear();
  if (!is_json_name(path)) return "";
  std::string attempt = path;
  for (int n = 0;; ++n) {
    const int fd = ::open(attempt.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      line = "# Writing JSON output to " + attempt;
      return attempt;
    }
    if (errno != EEXIST || n > 10000) {
      line = "# skipping json output; " + attempt + " not accessible";
      return "";
    }
    attempt = path + "." + std::to_string(n);
  }
}

std::string now_text() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

void write_nccl_json(const std::string& path, const NcclJsonRun& run) {
  const CommonOptions& o = *run.options;
  Json doc;
  doc["version"] = 3;
  doc["start_time"] = run.start_time;
  doc["args"] = o.args;
  doc["env"] = environment();
  doc["nccl_version"] = 0;  // no NCCL here
  Json config;
  config["nthreads"] = 1;
  config["ngpus"] = 1;
  config["minimum_bytes"] = o.min_bytes;
  config["maximum_bytes"] = o.max_bytes;
  if (o.step_factor > 1) {
    config["step_factor"] = o.step_factor;
  } else {
    config["step_bytes"] = o.step_bytes;
  }
  config["warmup_iters"] = o.warmup_iters;
  config["iterations"] = o.iters;
  config["aggregated_iterations"] = o.agg_iters;
  config["validation"] = o.check_iters;
  config["graph"] = 0;
  config["blocking_collectives"] = flag(o.blocking);
  config["per_iter_timing"] = flag(o.per_iter_timing);
  config["per_iter_skip"] = o.per_iter_skip;
  config["parallel_init"] = flag(false);
  Json devices = Json::array();
  for (const RankDescription& r : run.ranks) {
    Json d;
    d["rank"] = r.rank;
    d["group"] = 0;
    d["pid"] = r.pid;
    d["hostname"] = r.host;
    // -g 1: the rank's GPU as nccl-tests writes it (index, "%04x:%02x:%02x", name).
    const bool gpu = r.device >= 0;
    d["device"] = gpu ? r.device : r.local_index;
    d["device_hex"] = gpu ? r.device_pci : "0000:00:00";
    d["device_info"] = gpu ? r.device_name : run.device_info;
    devices.push_back(d);
  }
  config["devices"] = devices;
  doc["config"] = config;
  Json results = Json::array();
  const std::vector<Measurement>& rows = *run.rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Measurement& m = rows[i];
    if (m.in_place) continue;  // joined to the out-of-place group that precedes it
    Json r;
    r["size"] = m.size_bytes;
    r["count"] = m.count;
    r["type"] = m.type;
    r["redop"] = m.redop;
    char root[16];
    std::snprintf(root, sizeof root, "%6i", m.root);
    r["root"] = root;
    r["out_of_place"] = placement(m, o.report_cputime);
    if (o.per_iter_timing) r["out_of_place_per_iter"] = per_iteration(m.per_iter, o.per_iter_skip);
    if (i + 1 < rows.size() && rows[i + 1].in_place) {
      r["in_place"] = placement(rows[i + 1], o.report_cputime);
      if (o.per_iter_timing) r["in_place_per_iter"] = per_iteration(rows[i + 1].per_iter, o.per_iter_skip);
    }
    r["actual_iterations"] = o.iters;
    r["experiment_name"] = "";
    results.push_back(r);
  }
  doc["results"] = results;
  doc["out_of_bounds"] = {{"count", run.total_wrong}, {"okay", flag(run.total_wrong == 0)}};
  Json bandwidth;
  bandwidth["bandwidth"] = real(run.average_busbw);
  bandwidth["okay"] = run.min_bw > 0 ? flag(run.average_busbw >= run.min_bw * 0.9) : Json("unchecked");
  doc["average_bus_bandwidth"] = bandwidth;
  doc["errors"] = run.errors;
  doc["end_time"] = now_text();
  std::ofstream f(path, std::ios::trunc);
  f << doc.dump() << '\n';
  if (!f.flush()) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace kolo::bench

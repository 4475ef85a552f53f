#include "engine/flight_recorder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/config.hpp"
#include "common/log.hpp"

namespace kolo::engine {
namespace {

const char* state_name(int s) {
  switch (s) {
    case FlightEntry::queued: return "queued";
    case FlightEntry::running: return "running";
    case FlightEntry::done: return "done";
    case FlightEntry::failed: return "failed";
  }
  return "?";
}

// For the Chrome trace's events (written as operations finish, under KOLO_TRACE): by hand, as
// before. The dump (FlightRecorder::json) uses nlohmann/json.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

bool write_file(const std::string& path, const std::string& data) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

// SIGUSR1: the handler only writes a byte to a pipe; a thread started with the first recorder
// dumps every live recorder. Installed only if the application left SIGUSR1 alone.
struct Registry {
  std::mutex mu;
  std::vector<const FlightRecorder*> live;
  int pipe_w = -1;
  bool started = false;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: the dumper thread outlives statics
  return *r;
}

void on_sigusr1(int) {
  const int fd = registry().pipe_w;
  if (fd >= 0) {
    char one = 1;
    ssize_t ignored = ::write(fd, &one, 1);
    (void)ignored;
  }
}

void start_dumper_locked(Registry& r) {
  if (r.started) return;
  r.started = true;
  struct sigaction old{};
  if (::sigaction(SIGUSR1, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;  // not ours
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  r.pipe_w = fds[1];
  std::thread([rfd = fds[0]] {
    char byte;
    while (::read(rfd, &byte, 1) > 0) {
      std::lock_guard<std::mutex> lk(registry().mu);
      for (const FlightRecorder* fr : registry().live) fr->dump("SIGUSR1");
    }
  }).detach();
  struct sigaction sa{};
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &sa, nullptr);
}

// KOLO_TRACE's events, for the whole process: every group appends (its name is the event's
// thread), and the last group to end writes the file (again, with more events, if another
// group starts and ends later).
struct TraceSink {
  std::mutex mu;
  std::vector<std::string> events;
  int live_groups = 0;
};
TraceSink& trace_sink() {
  static TraceSink* t = new TraceSink;
  return *t;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// What a job id may hold, as it names files: letters, digits, '.', '-', '_' (others become '_').
std::string file_safe(const std::string& id) {
  std::string out;
  for (char c : id.substr(0, 64))
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return out;
}

std::string per_rank_path(const std::string& pattern, int rank) {
  const auto at = pattern.find("%r");
  if (at != std::string::npos) return pattern.substr(0, at) + std::to_string(rank) + pattern.substr(at + 2);
  return pattern + ".rank" + std::to_string(rank) + ".json";
}

}  // namespace

std::string FlightRecorder::job_id_from_environment(const std::string& fallback) {
  std::string id = config::get_string("KOLO_JOB_ID");
  if (id.empty()) {
    // torchrun without --rdzv-id says "none" in every job: no id at all.
    id = env_or_empty("TORCHELASTIC_RUN_ID");
    if (id == "none") id.clear();
    const std::string restarts = env_or_empty("TORCHELASTIC_RESTART_COUNT");
    if (!id.empty() && !restarts.empty() && restarts != "0") id.append("-attempt").append(restarts);
  }
  if (id.empty() && !env_or_empty("SLURM_JOB_ID").empty()) {
    id = env_or_empty("SLURM_JOB_ID");
    const std::string step = env_or_empty("SLURM_STEP_ID");
    if (!step.empty()) id.append(".").append(step);
  }
  for (const char* ompi : {"OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"})
    if (id.empty()) id = env_or_empty(ompi);
  if (id.empty() && !env_or_empty("MASTER_PORT").empty()) {
    const std::string addr = env_or_empty("MASTER_ADDR");
    id.append("master-").append(addr.empty() ? "127.0.0.1" : addr).append("-").append(env_or_empty("MASTER_PORT"));
  }
  if (id.empty()) id = fallback;
  return file_safe(id);
}

int FlightRecorder::world_size_from_environment(int fallback) {
  for (const char* name : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}) {
    const std::string text = env_or_empty(name);
    int n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (!text.empty() && ec == std::errc() && end == text.data() + text.size() && n > 0) return n;
  }
  return fallback;
}

FlightRecorder::FlightRecorder(size_t capacity, int rank, int size, std::string group, const std::string& job_fallback)
    : ring_(capacity),
      rank_(rank),
      size_(size),
      group_(std::move(group)),
      job_(job_id_from_environment(job_fallback)),
      world_size_(world_size_from_environment(size)) {
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  const auto mono = Clock::now().time_since_epoch();
  wall_offset_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(wall - mono).count();
  if (capacity == 0) return;
  const std::string trace = config::get_string("KOLO_TRACE");
  if (!trace.empty()) {
    trace_path_ = per_rank_path(trace, rank);
    std::lock_guard<std::mutex> lk(trace_sink().mu);
    ++trace_sink().live_groups;
  }
  std::lock_guard<std::mutex> lk(registry().mu);
  registry().live.push_back(this);
  start_dumper_locked(registry());
}

FlightRecorder::~FlightRecorder() {
  if (!ring_.empty()) {
    std::lock_guard<std::mutex> lk(registry().mu);
    auto& live = registry().live;
    live.erase(std::remove(live.begin(), live.end(), this), live.end());
  }
  if (trace_path_.empty()) return;
  TraceSink& sink = trace_sink();
  std::lock_guard<std::mutex> lk(sink.mu);
  if (--sink.live_groups > 0) return;
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < sink.events.size(); ++i) out += sink.events[i] + (i + 1 < sink.events.size() ? ",\n" : "\n");
  out += "],\"displayTimeUnit\":\"ms\"}\n";
  if (!write_file(trace_path_, out)) KOLO_LOG(warn, "KOLO_TRACE: cannot write " << trace_path_);
}

std::unique_ptr<FlightRecorder> FlightRecorder::from_config(int rank, int size, const std::string& group,
                                                            const std::string& job_fallback) {
  const int64_t n = config::get_int("KOLO_FR_SIZE");
  return std::make_unique<FlightRecorder>(static_cast<size_t>(std::max<int64_t>(0, n)), rank, size, group, job_fallback);
}

void FlightRecorder::started(FlightEntry* e, const char* transport, bool stamp) {
  if (!e) return;
  if (stamp) e->started.store(ticks_now(), std::memory_order_relaxed);
  e->transport.store(transport, std::memory_order_relaxed);
  e->state.store(FlightEntry::running, std::memory_order_release);
}

void FlightRecorder::finished(FlightEntry* e, bool ok) {
  if (!e) return;
  const uint64_t now = ticks_now();
  if (e->started.load(std::memory_order_relaxed) == 0) e->started.store(now, std::memory_order_relaxed);
  e->finished.store(now, std::memory_order_relaxed);
  e->state.store(ok ? FlightEntry::done : FlightEntry::failed, std::memory_order_release);
  if (!trace_path_.empty()) trace_event(*e);
}

void FlightRecorder::trace_event(const FlightEntry& e) {
  const double rate = scale_.ns_per_tick();
  const int64_t started = scale_.to_ns(e.started.load(), rate), finished = scale_.to_ns(e.finished.load(), rate);
  const int64_t start = started ? started : scale_.to_ns(e.issued, rate);
  std::ostringstream ev;
  ev << "{\"name\":" << json_string(std::string(e.op) + " #" + std::to_string(e.seq)) << ",\"cat\":\"kolo\",\"ph\":\"X\""
     << ",\"ts\":" << (start + wall_offset_ns_) / 1000 << ",\"dur\":" << std::max<int64_t>(0, finished - start) / 1000
     << ",\"pid\":" << rank_ << ",\"tid\":" << json_string(group_) << ",\"args\":{\"bytes\":" << e.bytes
     << ",\"algorithm\":" << json_string(e.algorithm) << ",\"transport\":" << json_string(e.transport.load())
     << ",\"state\":\"" << state_name(e.state.load()) << "\"}}";
  std::lock_guard<std::mutex> lk(trace_sink().mu);
  trace_sink().events.push_back(ev.str());
}

std::vector<FlightRecorder::Snapshot> FlightRecorder::snapshot() const {
  std::vector<Snapshot> out;
  const double rate = scale_.ns_per_tick();  // one calibration for the whole dump
  const uint64_t n = next_.load(std::memory_order_acquire);
  const uint64_t first = n > ring_.size() ? n - ring_.size() : 0;
  for (uint64_t i = first; i < n; ++i) {
    const FlightEntry& e = ring_[i % ring_.size()];
    const uint64_t v1 = e.version.load(std::memory_order_acquire);
    Snapshot s{e.seq, e.op, e.algorithm, e.transport.load(), e.bytes, e.root, e.state.load(), e.waiting_on.load(),
               scale_.to_ns(e.issued, rate), scale_.to_ns(e.started.load(), rate), scale_.to_ns(e.finished.load(), rate)};
    if ((v1 & 1) || e.version.load(std::memory_order_acquire) != v1) continue;  // rewritten meanwhile
    out.push_back(std::move(s));
  }
  return out;
}

std::string FlightRecorder::json(const std::string& reason) const {
  // ordered_json: the keys in the order written (kolo-trace does not care; people reading do).
  using Json = nlohmann::ordered_json;
  Json entries = Json::array();
  for (const auto& s : snapshot()) {
    auto wall_us = [&](int64_t ns) -> int64_t { return ns ? (ns + wall_offset_ns_) / 1000 : 0; };
    entries.push_back(Json{{"seq", s.seq},
                           {"op", s.op},
                           {"bytes", s.bytes},
                           {"root", s.root},
                           {"algorithm", s.algorithm},
                           {"transport", s.transport},
                           {"state", state_name(s.state)},
                           {"waiting_on", s.waiting_on},
                           {"issued_us", wall_us(s.issued_ns)},
                           {"started_us", wall_us(s.started_ns)},
                           {"finished_us", wall_us(s.finished_ns)}});
  }
  const Json doc{{"rank", rank_},      {"size", size_}, {"group", group_},   {"job", job_},
                 {"world_size", world_size_}, {"pid", ::getpid()}, {"reason", reason}, {"entries", std::move(entries)}};
  // A reason quoting a peer's bytes may not be UTF-8: replaced, never thrown at.
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string FlightRecorder::text(const std::string& reason) const {
  std::ostringstream o;
  o << "kolo flight recorder: rank " << rank_ << " of " << size_ << ", group " << group_ << ", job "
    << (job_.empty() ? "(no id)" : job_) << " (world of " << world_size_ << "), pid " << ::getpid()
    << "; dumped because: " << reason << "\n";
  for (const auto& s : snapshot()) {
    o << "  " << s.op << " #" << s.seq << "  " << s.bytes << " B  " << (s.algorithm.empty() ? "-" : s.algorithm) << "/"
      << (s.transport.empty() ? "-" : s.transport) << "  " << state_name(s.state);
    if (s.state == FlightEntry::running && s.waiting_on >= 0) o << ", waiting for rank " << s.waiting_on;
    if (s.finished_ns) o << "  " << (s.finished_ns - (s.started_ns ? s.started_ns : s.issued_ns)) / 1000 << " us";
    o << "\n";
  }
  return o.str();
}

std::string FlightRecorder::dump(const std::string& reason) const {
  if (ring_.empty()) return "";
  const std::string dir = config::get_string("KOLO_FR_DIR");
  ::mkdir(dir.c_str(), 0755);
  std::string safe_group;
  for (char c : group_) safe_group += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
  const std::string base = dir + "/" + (job_.empty() ? "" : job_ + ".") + safe_group + ".rank" + std::to_string(rank_);
  if (!write_file(base + ".json", json(reason)) || !write_file(base + ".txt", text(reason))) {
    KOLO_LOG(warn, "flight recorder: cannot write " << base << ".json/.txt");
    return "";
  }
  KOLO_LOG(warn, "flight recorder: wrote " << base << ".json and .txt (" << reason << "); merge every rank's with kolo-trace "
                                           << (job_.empty() ? "" : "--job " + job_ + " ") << dir);
  return base + ".json";
}

}  // namespace kolo::engine

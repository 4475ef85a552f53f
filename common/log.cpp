#include "common/log.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "common/config.hpp"

namespace kolo::log {
namespace {

constexpr const char* kLevelNames[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
constexpr const char* kSubsysNames[] = {"INIT", "COLL", "P2P", "NET", "SHM", "IB", "STORE", "ENV"};
static_assert(sizeof(kSubsysNames) / sizeof(kSubsysNames[0]) == static_cast<size_t>(Subsys::count));

std::atomic<int> g_rank{-1};

Level parse_level(const std::string& s) {
  if (s == "ERROR" || s == "error") return Level::error;
  if (s == "INFO" || s == "info") return Level::info;
  if (s == "DEBUG" || s == "debug") return Level::debug;
  if (s == "TRACE" || s == "trace") return Level::trace;
  return Level::warn;
}

// KOLO_DEBUG_SUBSYS: a comma list of subsystem names (or ALL); a leading ^ inverts it, as in
// NCCL ("^NET,SHM": everything but those). Unknown names are ignored.
unsigned parse_subsys(const std::string& text) {
  const unsigned all = (1u << static_cast<int>(Subsys::count)) - 1;
  std::string list = text;
  bool invert = false;
  if (!list.empty() && list[0] == '^') {
    invert = true;
    list.erase(0, 1);
  }
  unsigned mask = 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name == "ALL") mask = all;
    for (int i = 0; i < static_cast<int>(Subsys::count); ++i)
      if (name == kSubsysNames[i]) mask |= 1u << i;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return invert ? (all & ~mask) : mask;
}

std::string hostname() {
  char buf[256] = "?";
  if (::gethostname(buf, sizeof buf) != 0) return "?";
  buf[sizeof buf - 1] = '\0';
  return buf;
}

// KOLO_DEBUG_FILE's name for this process: %h host, %p pid, %r rank ("pid<N>" before the rank is
// known), %% a percent sign.
std::string expand_file_name(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'h') out += hostname();
    else if (c == 'p') out += std::to_string(::getpid());
    else if (c == 'r') out += g_rank.load() >= 0 ? std::to_string(g_rank.load()) : "pid" + std::to_string(::getpid());
    else if (c == '%') out += '%';
    else out += std::string("%") + c;
  }
  return out;
}

struct Settings {
  std::atomic<unsigned> subsys{0};
  std::mutex mu;                    // opening the file
  int fd = -1;                      // KOLO_DEBUG_FILE, opened at the first line written
  bool file_tried = false;
};
Settings g;

void load() {
  if (detail::level_read.load(std::memory_order_acquire) >= 0) return;
  std::lock_guard<std::mutex> lk(g.mu);
  if (detail::level_read.load(std::memory_order_relaxed) >= 0) return;
  g.subsys.store(parse_subsys(config::get_string("KOLO_DEBUG_SUBSYS")), std::memory_order_relaxed);
  detail::level_read.store(static_cast<int>(parse_level(config::get_string("KOLO_DEBUG"))), std::memory_order_release);
}

int output_fd() {
  std::lock_guard<std::mutex> lk(g.mu);
  if (!g.file_tried) {
    g.file_tried = true;
    const std::string pattern = config::get_string("KOLO_DEBUG_FILE");
    if (!pattern.empty()) {
      const std::string path = expand_file_name(pattern);
      g.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (g.fd < 0) {
        std::string msg = "kolo: cannot open KOLO_DEBUG_FILE " + path + "; logging to stderr\n";
        ssize_t ignored = ::write(2, msg.data(), msg.size());
        (void)ignored;
      }
    }
  }
  return g.fd >= 0 ? g.fd : 2;
}

const std::string& host() {
  static const std::string h = hostname();
  return h;
}

}  // namespace

const char* subsys_name(Subsys s) { return kSubsysNames[static_cast<int>(s)]; }

Level current_level() {
  load();
  return static_cast<Level>(detail::level_read.load(std::memory_order_relaxed));
}

namespace detail {
std::atomic<int> level_read{-1};

bool enabled_slow(Level l, Subsys s) {
  load();
  if (static_cast<int>(l) > detail::level_read.load(std::memory_order_relaxed)) return false;
  // Errors and warnings always show: the subsystem filter is for the chatty levels.
  return static_cast<int>(l) <= static_cast<int>(Level::warn) ||
         (g.subsys.load(std::memory_order_relaxed) & (1u << static_cast<int>(s))) != 0;
}
}  // namespace detail

void set_process_rank(int rank) {
  int expected = -1;
  g_rank.compare_exchange_strong(expected, rank);
}

void write(Level l, Subsys s, const std::string& msg) {
  // UTC wall time with microseconds: lines of every rank (and every host) sort together.
  const auto now = std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  // Room for any int the fields could hold (gcc 14+ checks that with -Wformat-truncation).
  char stamp[96];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us % 1000000));
  std::string line = stamp;
  line += ' ';
  line += host();
  line += ':' + std::to_string(::getpid()) + ':' + std::to_string(static_cast<long>(::syscall(SYS_gettid)));
  line += " kolo[";
  const int r = g_rank.load();
  line += r >= 0 ? "rank " + std::to_string(r) : "pid " + std::to_string(::getpid());
  line += "] ";
  line += kLevelNames[static_cast<int>(l)];
  line += ' ';
  line += subsys_name(s);
  line += ' ';
  line += msg;
  line += '\n';
  // One write() per line so lines of concurrent threads and ranks do not interleave.
  ssize_t ignored = ::write(output_fd(), line.data(), line.size());
  (void)ignored;
}

void reset_for_tests() {
  std::lock_guard<std::mutex> lk(g.mu);
  detail::level_read.store(-1);
  g.subsys.store(0);
  if (g.fd >= 0) ::close(g.fd);
  g.fd = -1;
  g.file_tried = false;
}

}  // namespace kolo::log

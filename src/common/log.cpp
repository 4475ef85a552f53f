#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "common/config.hpp"

namespace kolo::log {

static std::atomic<int> g_rank{-1};

static Level parse_level(const std::string& s) {
  if (s == "ERROR" || s == "error") return Level::error;
  if (s == "INFO" || s == "info") return Level::info;
  if (s == "DEBUG" || s == "debug") return Level::debug;
  if (s == "TRACE" || s == "trace") return Level::trace;
  return Level::warn;
}

Level current_level() {
  static const Level level = parse_level(config::get_string("KOLO_DEBUG"));
  return level;
}

bool enabled(Level l) { return static_cast<int>(l) <= static_cast<int>(current_level()); }

void set_process_rank(int rank) {
  int expected = -1;
  g_rank.compare_exchange_strong(expected, rank);
}

void write(Level l, const std::string& msg) {
  static const char* names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  std::string line = "kolo[";
  int r = g_rank.load();
  line += r >= 0 ? "rank " + std::to_string(r) : "pid " + std::to_string(getpid());
  line += "] ";
  line += names[static_cast<int>(l)];
  line += " ";
  line += msg;
  line += "\n";
  // One write() per line so lines of concurrent threads and ranks do not interleave.
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

}  // namespace kolo::log

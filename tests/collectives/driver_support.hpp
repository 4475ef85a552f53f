// Shared by the gtest driver files: where the worker and kolo-perf binaries are (meson passes
// them in the environment), the environment every launch gets, and helpers to read a rank's
// error line.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <stdexcept>
#include <string>

#include "process_world.hpp"

namespace kolo::coltest {

// The path in environment variable `name` (set by meson test), else `fallback` relative to the
// directory of this test binary (the build tree's layout), so the binary also runs by hand.
inline std::string binary_path(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  std::string path;
  if (v != nullptr && *v != '\0') {
    path = v;
  } else {
    char self[4096] = {};
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = len > 0 ? std::string(self, static_cast<size_t>(len)) : std::string();
    dir = dir.substr(0, dir.rfind('/') + 1);
    path = dir + fallback;
  }
  if (access(path.c_str(), X_OK) != 0)
    throw std::runtime_error(std::string(name) + ": no executable at '" + path + "' (meson test sets " + name + ")");
  return path;
}
inline std::string worker_binary() { return binary_path("KOLO_TEST_WORKER", "kolo-test-worker"); }
inline std::string perf_binary() { return binary_path("KOLO_PERF_BINARY", "../../bench/perf/kolo-perf"); }

// A launch of the worker running `scenario` on `world` ranks. KOLO_TIMEOUT bounds every
// collective inside; `deadline` bounds the whole launch.
inline LaunchSpec worker_launch(const std::string& scenario, int world, std::chrono::milliseconds deadline,
                                const std::string& kolo_timeout_seconds = "60") {
  LaunchSpec spec;
  spec.program = worker_binary();
  spec.args = {scenario};
  spec.world_size = world;
  spec.deadline = deadline;
  spec.env["KOLO_TIMEOUT"] = kolo_timeout_seconds;
  // Oversubscribed runs (8 ranks on 2 cores) go faster when waiting ranks do not spin.
  spec.env["KOLO_SPIN_US"] = world > 2 ? "0" : "50";
  return spec;
}

// The text of kolo's error as the worker printed it ("ERROR rank R [...]: Kind: text"): the
// part after the kind, so assertions look at kolo's message, not at the worker's prefix.
inline std::string error_line(const RankOutcome& r) {
  const size_t start = r.err.find("ERROR rank ");
  if (start == std::string::npos) return "";
  const size_t end = r.err.find('\n', start);
  return r.err.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

inline std::string error_kind(const RankOutcome& r) {
  const std::string line = error_line(r);
  const size_t open = line.find("]: ");
  if (open == std::string::npos) return "";
  const size_t colon = line.find(": ", open + 3);
  return line.substr(open + 3, colon == std::string::npos ? std::string::npos : colon - open - 3);
}

inline std::string error_text(const RankOutcome& r) {
  const std::string line = error_line(r);
  const size_t open = line.find("]: ");
  if (open == std::string::npos) return "";
  const size_t colon = line.find(": ", open + 3);
  return colon == std::string::npos ? "" : line.substr(colon + 2);
}

// Seconds from `hit_at` until the survivor's kolo error was raised (kolo-test-worker prints the
// steady_clock time; the process exits up to 1 s later: the TCP transport lingers after a
// failure so that peers can read its abort notice). A large number when it printed none.
inline double seconds_after(const RankOutcome& s, std::chrono::steady_clock::time_point hit_at) {
  std::smatch m;
  if (!std::regex_search(s.err, m, std::regex("raised at steady_clock ([0-9]+) ns"))) return 1e9;
  const std::chrono::steady_clock::time_point raised{std::chrono::nanoseconds(std::stoll(m[1]))};
  return std::chrono::duration<double>(raised - hit_at).count();
}

// Every rank exited 0 and printed its "OK rank" line (the worker's verdict on its checks).
inline void expect_all_ok(const WorldOutcome& outcome) {
  EXPECT_TRUE(outcome.all_succeeded()) << outcome.describe();
  for (const RankOutcome& r : outcome.ranks) EXPECT_NE(r.out.find("OK rank"), std::string::npos) << r.describe();
}

}  // namespace kolo::coltest

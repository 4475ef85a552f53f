#include "probe_files.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "kolorun_process.hpp"

namespace kolo::launcher::testing {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kolorun-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool wait_until_ready(const std::string& dir, int nproc, double timeout_seconds) {
  const double deadline = monotonic_seconds() + timeout_seconds;
  for (;;) {
    bool all = true;
    for (int r = 0; r < nproc && all; ++r)
      all = std::filesystem::exists(dir + "/" + std::to_string(r) + ".ready");
    if (all) return true;
    if (monotonic_seconds() > deadline) return false;
    ::usleep(5000);
  }
}

std::vector<int> recorded_signals(const std::string& dir, int rank) {
  std::istringstream in(read_text(dir + "/" + std::to_string(rank) + ".signals"));
  std::vector<int> signals;
  for (int sig; in >> sig;) signals.push_back(sig);
  return signals;
}

pid_t recorded_pid(const std::string& dir, int rank) {
  std::string text = read_text(dir + "/" + std::to_string(rank) + ".pid");
  return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
}

}  // namespace kolo::launcher::testing

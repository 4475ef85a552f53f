// The files probe_worker leaves behind (DIR/RANK.pid, .ready, .signals), and a scratch
// directory to hold them.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace kolo::launcher::testing {

class TempDir {
 public:
  TempDir();  // a fresh directory under $TMPDIR or /tmp
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();  // removes it and its files
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Contents of a file, or "" when it does not exist.
std::string read_text(const std::string& path);

// Waits until DIR/RANK.ready exists for every rank in [0, nproc). False after timeout_seconds.
bool wait_until_ready(const std::string& dir, int nproc, double timeout_seconds);

// The signal numbers rank recorded, in order of arrival.
std::vector<int> recorded_signals(const std::string& dir, int rank);

pid_t recorded_pid(const std::string& dir, int rank);

}  // namespace kolo::launcher::testing

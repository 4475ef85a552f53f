// Runs kolorun (or any program) from a test: captures stdout and stderr separately, measures
// how long it ran, and bounds every wait so a broken launcher fails the test instead of
// hanging it.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace kolo::launcher::testing {

struct ProcessResult {
  int wait_status = 0;
  std::string out;
  std::string err;
  double seconds = 0;  // from start to exit
  bool timed_out = false;

  bool exited() const;
  int exit_code() const;  // -1 unless exited()
};

// Paths the meson test passes in through the environment.
std::string kolorun_path();
std::string probe_path(const char* env_name);  // e.g. "KOLO_PROBE_WORKER"

class ChildProcess {
 public:
  // env_overrides are applied on top of this process's environment, minus KOLO_SECRET (so a
  // developer's own secret cannot leak into the tests) and with KOLO_LAUNCH_GRACE=1 unless
  // given. stdin_text is what the child reads on stdin (through a pipe).
  ChildProcess(const std::vector<std::string>& argv,
               const std::vector<std::pair<std::string, std::string>>& env_overrides = {},
               const std::string& stdin_text = "");
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }

  // Collects output until the child exits; past timeout_seconds the child is SIGKILLed and
  // the result says timed_out.
  ProcessResult wait(double timeout_seconds);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  double start_ = 0;
  bool waited_ = false;
};

// ChildProcess(kolorun + args).wait(timeout).
ProcessResult run_kolorun(const std::vector<std::string>& args,
                          const std::vector<std::pair<std::string, std::string>>& env_overrides = {},
                          double timeout_seconds = 15, const std::string& stdin_text = "");

double monotonic_seconds();

// Lines of text, without their newlines.
std::vector<std::string> split_lines(const std::string& text);

}  // namespace kolo::launcher::testing

// Test helper launched by kolorun that behaves per rank as told, and records what happens to it
// in files a test can read afterwards:
//   probe_worker DIR [--fail-rank R --exit-code C] [--kill-rank R --signal S]
//                [--ignore-term] [--sleep SECONDS]
// Every rank writes DIR/RANK.pid, installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT
// that append the signal number to DIR/RANK.signals, then writes DIR/RANK.ready. The failing
// rank then exits with C (or raises S); every other rank sleeps up to SECONDS (default 20) and
// exits 0. A recorded signal ends the rank with 128+signal, except SIGTERM under --ignore-term.
// A replacement (KOLO_JOIN=1, kolorun --replace) writes DIR/RANK.joined (its pid) and behaves as
// a rank that neither fails nor is killed. A rank given KOLO_STORE_ADDR writes it to DIR/RANK.store.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {

char g_signals_path[4096];
bool g_ignore_term = false;

void record_signal(int sig) {
  // Only async-signal-safe calls here.
  int fd = ::open(g_signals_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    char text[8];
    int len = 0;
    if (sig >= 10) text[len++] = static_cast<char>('0' + sig / 10);
    text[len++] = static_cast<char>('0' + sig % 10);
    text[len++] = '\n';
    ssize_t ignored = ::write(fd, text, static_cast<size_t>(len));
    (void)ignored;
    ::close(fd);
  }
  if (sig == SIGTERM && g_ignore_term) return;
  ::_exit(128 + sig);
}

void write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) std::exit(11);
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

double seconds_now() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string dir = argv[1];
  int fail_rank = -1, exit_code = 0, kill_rank = -1, kill_signal = 0;
  double sleep_seconds = 20;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : (std::exit(2), nullptr); };
    if (arg == "--fail-rank") fail_rank = std::atoi(next());
    else if (arg == "--exit-code") exit_code = std::atoi(next());
    else if (arg == "--kill-rank") kill_rank = std::atoi(next());
    else if (arg == "--signal") kill_signal = std::atoi(next());
    else if (arg == "--ignore-term") g_ignore_term = true;
    else if (arg == "--sleep") sleep_seconds = std::atof(next());
    else return 2;
  }
  const char* rank_text = std::getenv("RANK");
  if (rank_text == nullptr) return 3;
  const int rank = std::atoi(rank_text);
  const std::string base = dir + "/" + rank_text;

  write_file(base + ".pid", std::to_string(::getpid()));
  std::snprintf(g_signals_path, sizeof g_signals_path, "%s.signals", base.c_str());
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction action {};
    action.sa_handler = record_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(sig, &action, nullptr);
  }
  if (const char* store = std::getenv("KOLO_STORE_ADDR")) write_file(base + ".store", store);
  write_file(base + ".ready", "");

  const char* join = std::getenv("KOLO_JOIN");
  const bool replacement = join != nullptr && std::strcmp(join, "1") == 0;
  if (replacement) write_file(base + ".joined", std::to_string(::getpid()));
  if (rank == fail_rank && !replacement) return exit_code;
  if (rank == kill_rank && !replacement) {
    ::signal(kill_signal, SIG_DFL);
    ::raise(kill_signal);
    return 4;  // not reached for a deadly signal
  }
  const double deadline = seconds_now() + sleep_seconds;
  for (double left; (left = deadline - seconds_now()) > 0;) {
    timespec pause{static_cast<time_t>(left), static_cast<long>((left - static_cast<time_t>(left)) * 1e9)};
    ::nanosleep(&pause, nullptr);  // a handled, ignored SIGTERM interrupts it: sleep again
  }
  return 0;
}

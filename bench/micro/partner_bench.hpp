// What the Google Benchmark programs that measure against a forked partner per transport
// (kolo-bench-transport, kolo-bench-overhead) share: their command line (--transports LIST, then
// google-benchmark's own flags, passed on) and the partner's fork. Rank 0 is the benchmarking
// process; rank 1 a child that joins through a FileStore in a fresh folder, so each run is a real
// 2-process exchange over the real transport.
#pragma once
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "common/cli.hpp"

namespace kolo::bench {

struct PartnerBenchArgs {
  std::vector<std::string> transports;
  std::vector<std::string> benchmark_args;  // google-benchmark's, argv[0] first
};

// Parses `--transports LIST [google-benchmark flags]`. --help prints this program's help, then
// google-benchmark's flags, and exits 0. Returns nothing on a command-line error (said on
// stderr; the program exits 2).
inline std::optional<PartnerBenchArgs> parse_partner_bench_cli(int argc, char** argv, const std::string& tool,
                                                               const std::string& default_transports,
                                                               const std::string& description) {
  std::string list = default_transports;
  bool help = false;
  CLI::App app{"", tool};
  kolo::cli::configure(app, "usage: " + tool + " [--transports " + default_transports + "] [google-benchmark flags]\n");
  app.description(description);
  app.allow_extras();  // google-benchmark's own flags (--benchmark_filter=...): passed on to it
  app.add_option("--transports", list, "transports measured, comma-separated (" + default_transports + ")")
      ->type_name("LIST");
  kolo::cli::add_help(app, help, "show this help, then google-benchmark's flags");
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "%s: %s\n", tool.c_str(), e.what());
    return std::nullopt;
  }
  PartnerBenchArgs out;
  out.benchmark_args.push_back(argv[0]);
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    std::fflush(stdout);
    std::vector<char*> v = {argv[0], const_cast<char*>("--help")};
    int n = 2;
    benchmark::Initialize(&n, v.data());  // prints google-benchmark's flags and exits 0
    std::exit(0);
  }
  for (const std::string& a : app.remaining()) out.benchmark_args.push_back(a);
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = list.find(',', start);
    std::string part = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.transports.push_back(std::move(part));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Hands `args` to google-benchmark; false (said on stderr) when it does not know one of them.
inline bool initialize_benchmark(std::vector<std::string>& args) {
  std::vector<char*> v;
  for (std::string& a : args) v.push_back(a.data());
  int n = static_cast<int>(v.size());
  benchmark::Initialize(&n, v.data());
  return !benchmark::ReportUnrecognizedArguments(n, v.data());
}

// A forked rank 1 and the folder of its FileStore.
struct Partner {
  pid_t pid = -1;
  std::string dir;
  std::string store() const { return dir + "/store"; }
  // Waits for the partner (killing it first when `kill_it`), removes its folder; true when it
  // exited 0.
  bool finish(bool kill_it = false) const {
    if (kill_it) ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
};

// Forks rank 1 for `transport`: it runs `body(store path)` and exits with its value (3 if it
// threw, the message on stderr). Call it before this process starts a thread. Nothing on
// failure (said on stderr).
inline std::optional<Partner> fork_partner(const std::string& tool, const std::string& transport,
                                           const std::function<int(const std::string& store)>& body) {
  std::string dir = "/tmp/" + tool + "-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    std::perror((tool + ": mkdtemp").c_str());
    return std::nullopt;
  }
  Partner p{-1, dir};
  std::fflush(stdout);  // the child would print what stdio still holds a second time
  p.pid = ::fork();
  if (p.pid < 0) {
    std::perror((tool + ": fork").c_str());
    std::filesystem::remove_all(dir);
    return std::nullopt;
  }
  if (p.pid == 0) {
    int code = 3;
    try {
      code = body(p.store());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: rank 1 (%s): %s\n", tool.c_str(), transport.c_str(), e.what());
    }
    std::_Exit(code);
  }
  return p;
}

}  // namespace kolo::bench

// What kolo-per-call-instructions and kolo-per-call-instructions-mpi share (header-only, no
// libkolo): the command line `OPERATION ITERATIONS` and the way the calls are batched, so that
// scripts/bench/per-call-instructions.sh --versus-mpi counts the same thing on both sides.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"  // common/: the programs' shared CLI11 setup

namespace kolo::bench {

struct PerCallArgs {
  int operation = 0;  // index into the names given
  int iterations = 0;
};

// Parses `OPERATION ITERATIONS` (both required, OPERATION one of `names`). --help prints the
// help and sets `exit_code` 0; a command-line error is said on stderr and sets it 2. Returns the
// arguments when the program should go on.
inline std::optional<PerCallArgs> parse_per_call_cli(int argc, char** argv, const std::string& tool,
                                                     const std::string& usage, const std::string& description,
                                                     const std::vector<std::string>& names, int& exit_code) {
  std::string op;
  PerCallArgs out;
  bool help = false;
  CLI::App app{"", tool};
  kolo::cli::configure(app, usage);
  app.description(description);
  // Both required, checked after parsing so that --help alone is not an error.
  CLI::Option* op_given = app.add_option("OPERATION", op, "the operation measured")->check(CLI::IsMember(names));
  CLI::Option* n_given =
      app.add_option("ITERATIONS", out.iterations, "calls measured")->type_name("N")->check(CLI::NonNegativeNumber);
  kolo::cli::add_help(app, help);
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
    if (!help && (op_given->count() == 0 || n_given->count() == 0))
      throw CLI::ValidationError("OPERATION and ITERATIONS are required");
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "%s: %s\n%s", tool.c_str(), e.what(), kolo::cli::help(app).c_str());
    exit_code = 2;
    return std::nullopt;
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    exit_code = 0;
    return std::nullopt;
  }
  out.operation = static_cast<int>(std::find(names.begin(), names.end(), op) - names.begin());
  return out;
}

// Runs `measure(count)` for `iterations` calls in all. A rooted operation on several ranks goes
// in batches that the senders send at once (fewer messages than a ring holds: no sender waits for
// room) while the receivers first sleep 10 ms per rank (outside measure()), so that the messages
// are there when they call: no rank polls for something not yet sent, and each count is the
// calls' own instructions, not the polls of a wait.
inline void run_per_call(int iterations, int rank, int size, bool from_root, bool to_root,
                         const std::function<void()>& barrier, const std::function<void(int count)>& measure) {
  if (size == 1 || !(from_root || to_root)) {
    measure(iterations);
    return;
  }
  constexpr int kBatch = 16;
  const bool receives = from_root ? rank != 0 : rank == 0;
  for (int done = 0; done < iterations; done += kBatch) {
    barrier();
    if (receives) std::this_thread::sleep_for(std::chrono::milliseconds(10 * (rank + 1)));
    measure(std::min(kBatch, iterations - done));
  }
}

}  // namespace kolo::bench

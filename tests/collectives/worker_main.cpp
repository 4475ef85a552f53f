// kolo-test-worker: one rank of a multi-process collective test. Started by the gtest driver
// (process_world.hpp) with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, it joins the
// group, runs the scenario named by its first argument and checks every result against the
// reference (reference.hpp). Exit status: 0 every check passed, 1 a check failed, 2 kolo threw
// (the error's type and text are printed on stderr), 3 bad usage, 4 any other exception.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <typeinfo>

#include "worker_context.hpp"

namespace kolo::coltest {

ProcessGroup& WorkerContext::join(const GroupOptions& options) {
  group = init_from_env(options);
  world = group->size();
  return *group;
}

void WorkerContext::say(const std::string& line) const {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

namespace {

const std::map<std::string, Scenario>& scenarios() {
  static const std::map<std::string, Scenario> table = {
      {"matrix", scenario_matrix},
      {"inflight", scenario_inflight},
      {"subgroups", scenario_subgroups},
      {"allreduce-loop", scenario_allreduce_loop},
      {"mismatch-collective", scenario_mismatch_collective},
      {"mismatch-count", scenario_mismatch_count},
      {"join", scenario_join},
      {"bad-arguments", scenario_bad_arguments},
      {"work-api", scenario_work_api},
      {"device", scenario_device},
      {"who-runs", scenario_who_runs},
      {"direct", scenario_direct},
      {"direct-order", scenario_direct_order},
      {"direct-forward", scenario_direct_forward},
      {"fr-stall", scenario_fr_stall},
      {"fr-sigusr1", scenario_fr_sigusr1},
      {"random", scenario_random},
      {"sockets", scenario_sockets},
      {"dead-before-connect", scenario_dead_before_connect},
      {"any-source", scenario_any_source},
      {"any-source-fails", scenario_any_source_fails},
      {"split-share", scenario_split_share},
      {"split-share-misorder", scenario_split_share_misorder},
      {"split-share-kill", scenario_split_share_kill},
      {"split-share-disagree", scenario_split_share_disagree},
      {"shrink", scenario_shrink},
      {"grow", scenario_grow},
  };
  return table;
}

// The most specific kolo error class, so the driver can assert on it.
std::string error_kind(const std::exception& e) {
  if (const auto* m = dynamic_cast<const MismatchError*>(&e)) return "MismatchError(peer " + std::to_string(m->peer_rank()) + ")";
  if (const auto* p = dynamic_cast<const PeerError*>(&e)) return "PeerError(peer " + std::to_string(p->peer_rank()) + ")";
  if (const auto* t = dynamic_cast<const TimeoutError*>(&e)) return "TimeoutError(peer " + std::to_string(t->peer_rank()) + ")";
  if (const auto* x = dynamic_cast<const ExcludedError*>(&e)) return "ExcludedError(generation " + std::to_string(x->generation()) + ")";
  if (dynamic_cast<const InvalidArgument*>(&e)) return "InvalidArgument";
  if (dynamic_cast<const Error*>(&e)) return "Error";
  return std::string("non-kolo exception ") + typeid(e).name();
}

// A crash prints a backtrace to stderr, so a CI log shows where a worker died.
void print_backtrace_and_die(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char header[] = "kolo-test-worker: fatal signal, backtrace:\n";
  (void)!write(2, header, sizeof header - 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

}  // namespace
}  // namespace kolo::coltest

int main(int argc, char** argv) {
  using namespace kolo::coltest;
  if (argc < 2 || scenarios().count(argv[1]) == 0) {
    std::fprintf(stderr, "usage: %s SCENARIO [args]; scenarios:", argv[0]);
    for (const auto& [name, fn] : scenarios()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 3;
  }
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) signal(sig, print_backtrace_and_die);
  WorkerContext ctx;
  ctx.rank = env_int("RANK", 0);
  ctx.world = env_int("WORLD_SIZE", 1);
  ctx.log = CheckLog(ctx.rank);
  for (int i = 2; i < argc; ++i) ctx.args.emplace_back(argv[i]);
  const std::string scenario = argv[1];
  try {
    scenarios().at(scenario)(ctx);
    if (ctx.group) ctx.group->shutdown();
  } catch (const std::exception& e) {
    // When kolo raised, on the clock every process shares (steady_clock is CLOCK_MONOTONIC):
    // the chaos trials time the error itself, not the teardown after it.
    const auto raised_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
    const bool from_kolo = dynamic_cast<const kolo::Error*>(&e) != nullptr;
    std::fprintf(stderr, "ERROR rank %d [%s%s%s]: %s: %s\n", ctx.rank, scenario.c_str(),
                 ctx.log.current_case().empty() ? "" : ": ", ctx.log.current_case().c_str(), error_kind(e).c_str(),
                 e.what());
    std::fprintf(stderr, "raised at steady_clock %lld ns\n", static_cast<long long>(raised_ns));
    std::fflush(stderr);
    if (ctx.group) ctx.group->abort(std::string("kolo-test-worker failed: ") + e.what());
    return from_kolo ? 2 : 4;
  }
  if (ctx.log.failures() != 0) {
    std::fprintf(stderr, "rank %d: %zu failed checks in %zu cases\n", ctx.rank, ctx.log.failures(), ctx.log.cases());
    return 1;
  }
  ctx.say("OK rank " + std::to_string(ctx.rank) + ": " + std::to_string(ctx.log.cases()) + " cases");
  return 0;
}

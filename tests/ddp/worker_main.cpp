// ddp-test-worker SCENARIO: see worker.hpp.
#include <cstdlib>
#include <map>
#include <string>

#include "worker.hpp"

int main(int argc, char** argv) {
  using namespace kolo::ddptest;
  const std::map<std::string, Scenario> scenarios = {
      {"average", scenario_average},       {"no-sync", scenario_no_sync},   {"overlap", scenario_overlap},
      {"compression", scenario_compression}, {"mismatch", scenario_mismatch}, {"peer-dies", scenario_peer_dies},
      {"sharded", scenario_sharded},         {"sharded-compression", scenario_sharded_compression},
      {"sharded-mismatch", scenario_sharded_mismatch}, {"device", scenario_device},
  };
  if (argc != 2 || scenarios.count(argv[1]) == 0) {
    std::fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
    return 3;
  }
  Worker w;
  const char* rank = std::getenv("RANK");
  w.rank = rank != nullptr ? std::atoi(rank) : 0;
  try {
    w.group = kolo::init_from_env();
    scenarios.at(argv[1])(w);
    if (w.group) w.group->shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ERROR rank %d [%s]: %s\n", w.rank, w.current_case.c_str(), e.what());
    std::fflush(stderr);
    if (w.group) w.group->abort(std::string("ddp-test-worker failed: ") + e.what());
    return 2;
  }
  if (w.failures != 0) {
    std::fprintf(stderr, "rank %d: %zu failed checks\n", w.rank, w.failures);
    return 1;
  }
  w.say("OK rank " + std::to_string(w.rank));
  return 0;
}

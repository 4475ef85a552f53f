// Scenarios for the flight recorder (src/engine/flight_recorder.hpp):
//  "fr-stall"   (3+ ranks, KOLO_TIMEOUT small): rank 1 sleeps before its 4th all-reduce, so the
//               others time out waiting for it and dump their recorders; kolo-trace (run by the
//               driver) must name rank 1 and the collective.
//  "fr-sigusr1" (any world): after three all-reduces every rank sends itself SIGUSR1; its dump
//               must appear in KOLO_FR_DIR, say SIGUSR1 and list the three all-reduces as done.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "worker_context.hpp"

namespace kolo::coltest {

void scenario_fr_stall(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  std::vector<float> x(1024, 1.0f);
  for (int i = 0; i < 6; ++i) {
    if (i == 3 && ctx.rank == 1) std::this_thread::sleep_for(std::chrono::seconds(6));
    g.allreduce(Buffer(x.data(), x.size()))->wait();
  }
}

void scenario_fr_sigusr1(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  std::vector<float> x(256, 1.0f);
  for (int i = 0; i < 3; ++i) g.allreduce(Buffer(x.data(), x.size()))->wait();
  ctx.log.begin_case("SIGUSR1 dumps the flight recorder of a live job");
  ::raise(SIGUSR1);
  const char* dir = std::getenv("KOLO_FR_DIR");
  // This process's dump: the folder may hold other jobs' dumps of the same rank.
  const std::string mine = "\"pid\":" + std::to_string(::getpid()) + ",";
  std::string text;
  for (int tries = 0; tries < 100 && text.find("\"SIGUSR1\"") == std::string::npos; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (const auto& e : std::filesystem::directory_iterator(dir ? dir : "/tmp/kolo-flight-recorder")) {
      if (e.path().string().find(".rank" + std::to_string(ctx.rank) + ".json") == std::string::npos) continue;
      std::ifstream f(e.path());
      std::stringstream ss;
      ss << f.rdbuf();
      if (ss.str().find(mine) != std::string::npos) text = ss.str();
    }
  }
  ctx.log.expect(text.find("\"reason\":\"SIGUSR1\"") != std::string::npos, "a dump with reason SIGUSR1 appeared");
  size_t done = 0;
  for (size_t at = text.find("\"op\":\"allreduce\""); at != std::string::npos; at = text.find("\"op\":\"allreduce\"", at + 1))
    if (text.find("\"state\":\"done\"", at) != std::string::npos) ++done;
  ctx.log.expect(done >= 3, "the dump lists the three finished all-reduces (found " + std::to_string(done) + ")");
  g.barrier()->wait();
}

}  // namespace kolo::coltest

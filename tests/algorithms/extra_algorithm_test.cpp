// Adding an algorithm is one file and one registration line: extra_algorithm.cpp is that file,
// its line in this program's meson `files()` list the registration. Proven here from the outside:
// the registry lists it in wire-id order, a request by name reaches it (and is refused for a
// collective it does not serve), the cost model's choice considers it, and the engine runs it
// between forked processes over shared memory and TCP with every element checked. A second
// algorithm on its wire id stops the program at load.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "kolo/kolo.hpp"

namespace kolo::algo {
extern std::atomic<int> star_runs;
}

namespace {

using namespace kolo::algo;

TEST(ExtraAlgorithm, TheRegistryListsItInWireIdOrder) {
  const Algorithm* star = find_algorithm(CollKind::allreduce, "star");
  ASSERT_NE(star, nullptr);
  EXPECT_EQ(star->wire_id, 200);
  EXPECT_EQ(algorithm_by_wire_id(200), star);
  EXPECT_EQ(find_algorithm(CollKind::broadcast, "star"), nullptr) << "it serves all-reduce only";
  const auto& all = all_algorithms();
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1]->wire_id, all[i]->wire_id);
  EXPECT_EQ(all.back(), star) << "the highest wire id comes last";
}

TEST(ExtraAlgorithm, RequestsByNameReachItAndOnlyForWhatItServes) {
  CollArgs a;
  a.kind = CollKind::allreduce;
  a.count = 1000;
  EXPECT_STREQ(select_algorithm(a, 3, "star").name, "star");
  EXPECT_STREQ(select_algorithm(a, 3, "allreduce=star").name, "star");
  EXPECT_STREQ(select_algorithm(a, 1, "star").name, "rd") << "below its min_ranks the automatic choice runs";
  a.kind = CollKind::broadcast;
  try {
    select_algorithm(a, 3, "broadcast=star");
    ADD_FAILURE() << "a broadcast 'star' was accepted";
  } catch (const kolo::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast has no algorithm 'star'"), std::string::npos) << e.what();
  }
}

TEST(ExtraAlgorithm, TheCostModelConsidersItsCostFunction) {
  // Four ranks on two hosts, 1 MiB: the model decides there, and "star" claims to be free.
  SelectionTunables t = SelectionTunables::from_config();
  t.algo.clear();
  t.use_model = true;
  CollArgs a;
  a.kind = CollKind::allreduce;
  a.dtype = kolo::DataType::uint8;
  a.count = 1 << 20;
  const HostLayout hosts = HostLayout::from_indices({0, 0, 1, 1});
  EXPECT_STREQ(select_algorithm(a, hosts, "", t).name, "star");
  t.use_model = false;
  EXPECT_STRNE(select_algorithm(a, hosts, "", t).name, "star") << "the threshold rule does not know it";
}

TEST(ExtraAlgorithmDeathTest, ASecondAlgorithmOnItsWireIdStopsTheProgram) {
  static const Algorithm clash{.name = "clash", .wire_id = 200, .serves = {CollKind::allreduce}, .run = nullptr};
  EXPECT_DEATH({ AlgorithmRegistration r{clash}; }, "wire id is taken by 'star'");
}

// Three ranks (this process and two forked), all-reduce through the engine with the algorithm
// requested by name: sum and avg of 1001 floats, every element checked, and each rank's own
// count of runs proves that "star" ran (not a fallback).
void run_three_ranks(const std::string& transport) {
  const std::string store =
      (std::filesystem::temp_directory_path() / ("kolo-extra-algo-" + std::to_string(getpid()) + "-" + transport)).string();
  std::filesystem::remove_all(store);
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1001;
  auto one = [&](int rank) -> std::string {
    try {
      kolo::GroupOptions o;
      o.transport = transport;
      o.secret = "extra-algorithm-test";
      o.timeout = std::chrono::milliseconds(60000);
      auto g = kolo::ProcessGroup::create(kolo::make_file_store(store), rank, kRanks, o);
      const int before = star_runs.load();
      for (kolo::ReduceKind op : {kolo::ReduceKind::sum, kolo::ReduceKind::avg}) {
        std::vector<float> x(kCount);
        for (size_t i = 0; i < kCount; ++i) x[i] = static_cast<float>(rank * 1000 + i);
        kolo::AllreduceOptions ao;
        ao.op = op;
        ao.algorithm = "star";
        g->allreduce(kolo::Buffer(x.data(), x.size()), ao)->wait();
        for (size_t i = 0; i < kCount; ++i) {
          const float sum = static_cast<float>(3000 + 3 * i);  // ranks 0, 1, 2
          const float want = op == kolo::ReduceKind::sum ? sum : sum / 3;
          if (x[i] != want)
            return "element " + std::to_string(i) + " is " + std::to_string(x[i]) + ", want " + std::to_string(want);
        }
      }
      g->shutdown();
      if (star_runs.load() - before != 2) return "star ran " + std::to_string(star_runs.load() - before) + " times, not 2";
      return "";
    } catch (const std::exception& e) {
      return std::string("exception: ") + e.what();
    }
  };
  std::vector<pid_t> kids;
  for (int r = 1; r < kRanks; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string f = one(r);
      if (!f.empty()) std::fprintf(stderr, "rank %d: %s\n", r, f.c_str());
      _exit(f.empty() ? 0 : 1);
    }
    kids.push_back(pid);
  }
  EXPECT_EQ(one(0), "");
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a forked rank failed (its stderr says)";
  }
  std::filesystem::remove_all(store);
}

TEST(ExtraAlgorithm, TheEngineRunsItOverSharedMemory) { run_three_ranks("shm"); }
TEST(ExtraAlgorithm, TheEngineRunsItOverTcp) { run_three_ranks("tcp"); }

}  // namespace

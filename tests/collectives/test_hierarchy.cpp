// One machine split into pretend hosts (KOLO_HOST_ID: rank r on host h<r/2>, 4 hosts x 2
// ranks): ranks of a host talk over shared memory and across hosts over TCP, and large
// all-reduce, all-gather, reduce-scatter and broadcast take the hierarchical algorithms. kolo-perf
// with -c 1 checks every element of every size; the INFO log says which algorithm and which
// transport each collective used, so the test knows the hierarchical path really ran.
#include <gtest/gtest.h>

#include <string>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

LaunchSpec pretend_hosts(std::vector<std::string> args) {
  LaunchSpec spec;
  spec.program = perf_binary();
  spec.args = std::move(args);
  spec.world_size = 8;
  spec.deadline = std::chrono::seconds(240);
  spec.env["KOLO_TIMEOUT"] = "120";
  spec.env["KOLO_SOCKET_IFADDR"] = "127.0.0.1";  // the pretend hosts are all this machine
  spec.env["KOLO_DEBUG"] = "INFO";
  spec.env["KOLO_DEBUG_SUBSYS"] = "COLL";
  spec.rank_env = [](int rank) { return Env{{"KOLO_HOST_ID", "pretend-host-" + std::to_string(rank / 2)}}; };
  return spec;
}

TEST(PretendHosts, LargeCollectivesGoHierarchicalOverShmAndTcpAndCheckClean) {
  for (const char* coll : {"allreduce", "allgather", "reducescatter", "broadcast"}) {
    const WorldOutcome outcome =
        run_world(pretend_hosts({coll, "-b", "8", "-e", "1M", "-f", "16", "-c", "1", "-n", "1", "-w", "1"}));
    ASSERT_TRUE(outcome.all_succeeded()) << coll << ": " << outcome.describe();
    EXPECT_NE(outcome.ranks[0].out.find("# Out of bounds values : 0 OK"), std::string::npos) << coll << ": " << outcome.ranks[0].out;
    for (const RankOutcome& r : outcome.ranks)
      EXPECT_NE(r.err.find(": algorithm hier,"), std::string::npos) << coll << ": rank " << r.rank << " never ran hier\n" << r.err;
    // Rank 0's ring neighbour (rank 1) shares its pretend host; rank 1's (rank 2) does not.
    EXPECT_NE(outcome.ranks[0].err.find(", transport shm,"), std::string::npos) << coll << "\n" << outcome.ranks[0].err;
    EXPECT_NE(outcome.ranks[1].err.find(", transport tcp,"), std::string::npos) << coll << "\n" << outcome.ranks[1].err;
  }
}

}  // namespace
}  // namespace kolo::coltest

// kolorun across hosts: the host list, where each rank lands, and the command a launch agent gets.
#include <gtest/gtest.h>

#include "kolo/error.hpp"
#include "kolorun/host_list.hpp"
#include "kolorun/options.hpp"

namespace kolo::launcher {
namespace {

TEST(HostList, SlotsDefaultToOneAndKeepOrder) {
  auto hosts = parse_host_list("kolo-h0:2,kolo-h1,10.0.0.3:3", 1024);
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "kolo-h0");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].name, "kolo-h1");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(hosts[2].name, "10.0.0.3");
  EXPECT_EQ(hosts[2].slots, 3);
  EXPECT_EQ(total_slots(hosts), 6);
}

TEST(HostList, RejectsMalformedLists) {
  EXPECT_THROW(parse_host_list("", 1024), InvalidArgument);
  EXPECT_THROW(parse_host_list("a,,b", 1024), InvalidArgument);
  EXPECT_THROW(parse_host_list("a:0", 1024), InvalidArgument);
  EXPECT_THROW(parse_host_list("a:x", 1024), InvalidArgument);
  EXPECT_THROW(parse_host_list("a:2000", 1024), InvalidArgument);
  EXPECT_THROW(parse_host_list("a:1,a:2", 1024), InvalidArgument);
}

TEST(HostList, RanksFillHostsSlotBySlot) {
  auto hosts = parse_host_list("a:2,b:1,c:2", 1024);
  const int expect_host[] = {0, 0, 1, 2, 2};
  const int expect_local[] = {0, 1, 0, 0, 1};
  const int expect_size[] = {2, 2, 1, 2, 2};
  for (int r = 0; r < 5; ++r) {
    Placement p = place_rank(hosts, r);
    EXPECT_EQ(p.host_index, expect_host[r]) << r;
    EXPECT_EQ(p.local_rank, expect_local[r]) << r;
    EXPECT_EQ(p.local_size, expect_size[r]) << r;
    EXPECT_EQ(p.host, hosts[static_cast<size_t>(expect_host[r])].name) << r;
  }
  EXPECT_THROW(place_rank(hosts, 5), Error);
}

TEST(HostList, AgentWordsPlaceOrAppendTheHost) {
  EXPECT_EQ(agent_words("ip netns exec {host}", "kolo-h1"),
            (std::vector<std::string>{"ip", "netns", "exec", "kolo-h1"}));
  EXPECT_EQ(agent_words("  ssh  -o BatchMode=yes ", "n7"), (std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "n7"}));
  EXPECT_EQ(agent_words("docker exec ctr-{host}", "2"), (std::vector<std::string>{"docker", "exec", "ctr-2"}));
  EXPECT_THROW(agent_words("   ", "h"), InvalidArgument);
}

TEST(HostList, RemoteCommandCarriesTheVariablesThroughEnv) {
  auto argv = remote_command("ip netns exec {host}", "h0", {"RANK=3", "KOLO_SECRET=ab"}, {"prog", "--flag"});
  EXPECT_EQ(argv, (std::vector<std::string>{"ip", "netns", "exec", "h0", "env", "RANK=3", "KOLO_SECRET=ab", "prog", "--flag"}));
}

TEST(HostList, OptionsTakeTheRankCountAndMasterFromTheHosts) {
  LaunchOptions o = parse_launch_options({"--hosts", "kolo-h0:2,kolo-h1:2", "--launch-agent", "ip netns exec {host}", "prog"});
  EXPECT_EQ(o.nproc, 4);
  EXPECT_EQ(o.master_addr, "kolo-h0");
  EXPECT_EQ(o.launch_agent, "ip netns exec {host}");
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog"}));
  o = parse_launch_options({"-np", "3", "-H", "a:2,b", "--master-addr", "10.77.0.10", "prog"});
  EXPECT_EQ(o.nproc, 3);
  EXPECT_EQ(o.master_addr, "10.77.0.10");
  EXPECT_EQ(o.launch_agent, "ssh -o BatchMode=yes");
  EXPECT_THROW(parse_launch_options({"-n", "5", "-H", "a:2,b", "prog"}), InvalidArgument);
  EXPECT_THROW(parse_launch_options({"-H", "a", "--launch-agent", "", "prog"}), InvalidArgument);
  EXPECT_THROW(parse_launch_options({"-x", "GROUP_RANK=1", "-H", "a", "prog"}), InvalidArgument);
}

}  // namespace
}  // namespace kolo::launcher

// Launching across hosts, as mpirun -H does: a host list with slot counts says where each rank
// runs, and a launch agent (ssh, `ip netns exec {host}`, `docker exec {host}`) starts it there.
#pragma once
#include <string>
#include <vector>

namespace kolo::launcher {

struct HostSlots {
  std::string name;
  int slots = 1;
};

// Where one rank runs: ranks fill the hosts in list order, slot by slot (mpirun's --map-by slot).
struct Placement {
  int host_index = 0;  // GROUP_RANK
  int local_rank = 0;
  int local_size = 1;
  std::string host;
};

// "h0:2,h1:2,h2" -> {h0,2},{h1,2},{h2,1}. Throws kolo::InvalidArgument on an empty name, a
// repeated host or a slot count outside 1..max_slots.
std::vector<HostSlots> parse_host_list(const std::string& text, int max_slots);

int total_slots(const std::vector<HostSlots>& hosts);

// Placement of `rank`; rank < total_slots(hosts).
Placement place_rank(const std::vector<HostSlots>& hosts, int rank);

// The agent's words with {host} replaced by `host`; without a {host} the host is appended, as
// ssh wants it ("ssh -o BatchMode=yes" -> ... h0). Words are split on blanks; the agent gets
// them as separate arguments (no shell).
std::vector<std::string> agent_words(const std::string& agent, const std::string& host);

// The whole command for a rank on another host: the agent, then `env NAME=VALUE...` with the
// variables kolorun sets (an agent such as ssh does not carry kolorun's environment), then
// the program.
std::vector<std::string> remote_command(const std::string& agent, const std::string& host,
                                        const std::vector<std::string>& variables,
                                        const std::vector<std::string>& program);

}  // namespace kolo::launcher

#include "algorithms/hierarchy.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "algorithms/sub_comm.hpp"

namespace kolo::algo {

HostPlan plan_hosts(const Comm& comm, int root) {
  const HostLayout& hosts = comm.hosts();
  if (hosts.size() != comm.size())
    throw std::logic_error("kolo: host layout of " + std::to_string(hosts.size()) + " ranks for a group of " +
                           std::to_string(comm.size()));
  HostPlan p;
  const int me = comm.rank();
  p.my_host = hosts.host_of[static_cast<size_t>(me)];
  p.local = hosts.members[static_cast<size_t>(p.my_host)];
  p.my_local = static_cast<int>(std::find(p.local.begin(), p.local.end(), me) - p.local.begin());
  const int root_host = root >= 0 ? hosts.host_of[static_cast<size_t>(root)] : -1;
  for (int h = 0; h < hosts.num_hosts(); ++h)
    p.leaders.push_back(h == root_host ? root : hosts.members[static_cast<size_t>(h)].front());
  const int my_leader = p.leaders[static_cast<size_t>(p.my_host)];
  p.leader_local = static_cast<int>(std::find(p.local.begin(), p.local.end(), my_leader) - p.local.begin());
  return p;
}

void run_phase(const Algorithm& algo, Comm& parent, const std::vector<int>& ranks, int my_index, const CollArgs& args,
               int slot_base, bool finalizes) {
  SubComm sub(parent, ranks, my_index, args, slot_base, finalizes);
  algo.run(sub);
}

const Algorithm& registered(CollKind kind, const char* name) {
  const Algorithm* a = find_algorithm(kind, name);
  if (a == nullptr) throw std::logic_error(std::string("kolo: no ") + coll_name(kind) + " algorithm '" + name + "'");
  return *a;
}

}  // namespace kolo::algo

// ProcessGroup's state, and how a group is made, inside the library: the entry points
// (process_group.cpp), the connecting of a group (group_connect.cpp) and its re-forming after a
// loss or for joiners (group_reform.cpp) share it. Not installed.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "common/log.hpp"
#include "engine/bootstrap.hpp"
#include "engine/device_issue.hpp"
#include "engine/executor.hpp"
#include "engine/shared_group.hpp"
#include "engine/spare_works.hpp"
#include "kolo/process_group.hpp"

namespace kolo {

// KOLO_TIMEOUT, for a group created without a timeout of its own.
std::chrono::milliseconds default_group_timeout();

// A group's connections and engine thread, held by the group that made them and by every
// subgroup split off with share_connections: the last one shut down closes them (the orderly,
// collective goodbye); the destructor does it when nobody called shutdown().
struct SharedConnections {
  explicit SharedConnections(std::shared_ptr<engine::Executor> e) : executor(std::move(e)) {}
  SharedConnections(const SharedConnections&) = delete;
  SharedConnections& operator=(const SharedConnections&) = delete;
  std::shared_ptr<engine::Executor> executor;
  ~SharedConnections() {
    try {
      executor->close_and_join();
    } catch (const std::exception& e) {
      KOLO_LOG(warn, "closing the connections of group " << executor->group().name << " failed: " << e.what());
    }
  }
};

struct ProcessGroup::Impl {
  std::shared_ptr<Store> store;
  std::string prefix;
  std::string name;
  engine::Secret secret{};
  std::string transport;
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout{0};
  std::vector<std::string> host_ids;
  algo::HostLayout hosts;  // host_ids as algorithms see them (selection, hierarchical algorithms)
  algo::SelectionTunables selection = algo::SelectionTunables::from_config();  // read once per group
  algo::SelectionMemo chosen;  // queue lock
  std::shared_ptr<engine::Executor> executor;  // shared: Works refer to it (weakly) to run inline
  std::shared_ptr<SharedConnections> connections;  // null once this group is shut down
  // Set for a subgroup that shares its parent's connections: its ranks and tag id as the
  // executor sees them (shared_group.hpp). Null for a group that owns its connections.
  std::shared_ptr<const engine::GroupInfo> shared;
  WorkPtr last;  // a sharing subgroup's last operation: its shutdown waits for it (queue lock)

  // What is marked "queue lock" is read and written under the executor's queue lock
  // (Executor::lock_queue), which every issue takes anyway: one lock per issue, and issue order
  // is queue order. The rest of the group's own state (split counts) is under `mu`.
  std::mutex mu;
  // Works' memory, recycled: taken under the queue lock only (the pool's one consumer).
  std::shared_ptr<engine::WorkPool> works = std::make_shared<engine::WorkPool>();
  // Works handed out again to a synchronous caller, who holds the only reference (queue lock;
  // spare_works.hpp). A sharing subgroup takes none: its `last` keeps each Work.
  engine::SpareWorks spares;
  uint64_t coll_seq = 0;  // queue lock, and so are the counters below and shut_down
  // Point-to-point: per peer, the sends and the receives issued (a receive's Work::seq; the
  // executor numbers receives again when it posts them: executor.hpp); and the receives from
  // any source, numbered apart (they take no collective number: other ranks do not count them).
  std::vector<uint64_t> send_seq, recv_seq;
  uint64_t any_source_seq = 0;
  int split_count = 0;
  std::map<std::vector<int>, int> member_subgroups;  // subgroup_of_members calls per member list
  bool shut_down = false;
  // Shrinking (shrink.hpp): generation G of a group lives under "<root_prefix>/gen<G>" and is
  // named "<root_name>/gen<G>"; a group made by create() or split() is its own root, generation 0.
  std::string root_prefix, root_name;
  int generation = 0;
  int carried = 0;         // connections kept from the group this one replaced (shrink)
  int shrink_attempts = 0;  // under mu: a failed attempt (a member died while connecting) may be retried
  int shrunk_to = 0;        // under mu: the generation this group shrank to, 0 if none
  // Growing (grow.hpp): the joiners' queue lives under "<root_prefix>/join".
  int grown_to = 0;         // under mu: the generation this group grew to, 0 if none
  bool joinable = false;    // under mu: grow or join was used on this line, so its end is announced there
  int64_t next_ticket = 1;  // under mu: rank 0's first joiner ticket not yet settled

  // `var_counts`: alltoallv's, which args.v points to (the task keeps them); null otherwise.
  // `gate`: what the operation waits for before it starts (a device operation's inputs).
  WorkPtr issue(const algo::CollArgs& args, const Buffer& send, const Buffer& recv, const CommonOptions& opts,
                std::shared_ptr<const algo::VarCounts>* var_counts = nullptr, engine::RunGate* gate = nullptr);
  // An operation whose buffers are device memory: staged through a pinned block (device_issue.hpp).
  WorkPtr issue_device(const algo::CollArgs& args, const Buffer& send, const Buffer& recv, const CommonOptions& opts,
                       std::shared_ptr<const algo::VarCounts>* var_counts);
  engine::GroupDevice device;
};

// Groups created under one name get distinct store prefixes, in the same order on every rank.
std::string next_prefix(const std::string& name);

std::shared_ptr<ProcessGroup> make_group(std::unique_ptr<ProcessGroup::Impl> impl);

// A group with connections of its own: agrees the secret (unless given), connects every rank
// under `prefix` in the store and starts its executor. `connect_timeout` (0: `timeout`) bounds
// the connecting alone. `reuse`: connections of the group it replaces that it may keep.
std::unique_ptr<ProcessGroup::Impl> connect_impl(std::shared_ptr<Store> store, const std::string& prefix,
                                                 const std::string& name, int rank, int size,
                                                 std::chrono::milliseconds timeout, const engine::Secret* secret,
                                                 const std::string& secret_text, const std::string& transport,
                                                 std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(0),
                                                 const engine::Reuse* reuse = nullptr);

// A subgroup that runs on `parent`'s connections and executor: no connection, no thread, no
// store traffic (the blame board's keys are written only after a timeout).
std::unique_ptr<ProcessGroup::Impl> share_impl(const ProcessGroup::Impl& parent, const std::string& prefix,
                                               const std::string& name, int rank,
                                               const std::vector<int>& parent_ranks,
                                               std::chrono::milliseconds timeout);

// The last group of a line that grow or join was used on tells the joiners still waiting that
// nobody will admit them (group_reform.cpp).
void announce_end_of_line(ProcessGroup::Impl& impl);

}  // namespace kolo

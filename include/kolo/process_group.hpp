// kolo::ProcessGroup: N processes that run collectives together, modelled on c10d's ProcessGroup.
//
// Every call checks its arguments (throwing InvalidArgument before any byte moves), queues the
// operation and returns a Work at once. A group runs its operations one after another in issue
// order on its own engine thread; every rank must issue the same collectives in the same order.
//
// Buffer conventions follow NCCL: `count` is per rank for allgather/gather (send holds count,
// recv holds count*size), for scatter/reduce_scatter (send holds count*size, recv holds count)
// and for alltoall (both hold count*size, block i goes to / comes from rank i). In-place means
// recv.ptr == send.ptr for allreduce/reduce/broadcast/alltoall, and send.ptr == recv.ptr +
// rank*count elements for allgather and gather; recv.ptr == send.ptr + rank*count for
// reduce_scatter and scatter. Any other overlap of send and recv is refused.
//
// A collective of count 0 (other than barrier and alltoallv) moves nothing, so, as in MPI and
// NCCL, no message is exchanged for it: it completes at issue when every earlier collective of
// the group has completed, else right after them. It still takes its place in the sequence, so
// every rank must issue it too; a rank that passes 0 where the others pass a count is reported
// at its next collective (a mismatch) or by the others' timeout, not by this one.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kolo/buffer.hpp"
#include "kolo/error.hpp"
#include "kolo/options.hpp"
#include "kolo/store.hpp"
#include "kolo/types.hpp"
#include "kolo/work.hpp"

namespace kolo {

// ProcessGroup::recv's `src` for "whichever rank sends first" (MPI_ANY_SOURCE, torch's
// dist.recv without src).
inline constexpr int kAnySource = -1;

struct GroupOptions {
  std::chrono::milliseconds timeout{0};  // 0: KOLO_TIMEOUT or 300 s
  std::string transport;                 // "": KOLO_TRANSPORT or automatic
  std::string secret;                    // "": KOLO_SECRET, else made by rank 0 and shared through the store
  std::string name = "default";          // names the group in logs and store keys
};

// How split() and new_group() make the subgroup.
//
// share_connections (NCCL's ncclConfig_t.splitShare): the subgroup opens no connection and
// starts no engine thread of its own: it runs its operations on this group's connections (its
// rank i talks to parent rank ranks[i] over the parent's pair) and on this group's engine thread,
// in one queue with the parent's operations (and those of every other group sharing them).
// The price, as in NCCL, is an ordering rule: every rank must issue the operations of the
// parent and of all its sharing subgroups in the same order (a rank's operations of the two
// groups form one sequence, and on every pair the messages of both must arrive in the order the
// receiver runs them). A rank that breaks it gets a MismatchError naming both groups and
// collectives with their sequence numbers (every message carries its group's id), or, where no
// message arrives, the TimeoutError of the operation's timeout: never a hang or wrong data.
// What the subgroup keeps its own: ranks, sequence numbers, Works, timeouts, and errors that
// name its ranks (and the parent's rank of the peer). What it shares: failure. A peer's death,
// a mismatch, a timeout or abort() on either group fails both (their connections are aborted),
// and every later operation of either fails at once. Destroying (or shutting down) a sharing
// subgroup waits for its last operation and leaves the parent working; shutting down the parent
// refuses its later operations but keeps the connections open for the subgroups that still use
// them: the last group on a set of connections closes them (the orderly goodbye of shutdown()).
// Subgroups of a sharing subgroup may share too (they run on the same connections) or not (they
// connect anew, as any non-sharing split).
struct SplitOptions {
  std::optional<bool> share_connections;  // unset: KOLO_SPLIT_SHARE (0: connect anew)
  std::chrono::milliseconds timeout{0};   // of the subgroup's operations; 0: this group's
};

// How shrink() forms the survivors' group (docs/ARCHITECTURE.md, "Shrinking a group").
struct ShrinkOptions {
  // How long the survivors wait for one another in the store, and then for the new group to
  // connect. 0: this group's timeout. A rank that answers later is refused (ExcludedError).
  std::chrono::milliseconds timeout{0};
};

// How grow() lets waiting processes in (docs/ARCHITECTURE.md, "Growing a group").
struct GrowOptions {
  // How long rank 0 waits for a first joiner when none is waiting yet; 0: decide at once (the
  // cheap check a trainer makes at every step boundary). The other members wait for its answer
  // this long plus the group's timeout.
  std::chrono::milliseconds wait{0};
  int max_joiners = 0;                    // admit at most this many; 0: every one waiting
  std::chrono::milliseconds timeout{0};   // bounds the new group's connecting; 0: this group's timeout
};

// How join() waits to be let into a running group.
struct JoinOptions {
  // How long to wait until the members' grow() admits this process; 0: the group's timeout
  // (GroupOptions.timeout, else KOLO_TIMEOUT). Connecting then takes at most the group's timeout.
  std::chrono::milliseconds timeout{0};
};

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  // Collective over `size` processes: every rank calls it with the same store. Connects to all
  // peers before returning; throws on a bad secret, a timeout or an unreachable peer.
  static std::shared_ptr<ProcessGroup> create(std::shared_ptr<Store> store, int rank, int size,
                                              const GroupOptions& opts = {});
  ~ProcessGroup();  // orderly shutdown if shutdown() was not called

  int rank() const;
  int size() const;
  const std::string& name() const;

  WorkPtr broadcast(const Buffer& buf, const BroadcastOptions& opts = {});
  WorkPtr allreduce(const Buffer& send, const Buffer& recv, const AllreduceOptions& opts = {});
  WorkPtr allreduce(const Buffer& inout, const AllreduceOptions& opts = {}) { return allreduce(inout, inout, opts); }
  // recv matters on the root only (other ranks may pass an empty Buffer).
  WorkPtr reduce(const Buffer& send, const Buffer& recv, const ReduceOptions& opts = {});
  WorkPtr allgather(const Buffer& send, const Buffer& recv, const AllgatherOptions& opts = {});
  WorkPtr gather(const Buffer& send, const Buffer& recv, const GatherOptions& opts = {});
  WorkPtr scatter(const Buffer& send, const Buffer& recv, const ScatterOptions& opts = {});
  WorkPtr reduce_scatter(const Buffer& send, const Buffer& recv, const ReduceScatterOptions& opts = {});
  WorkPtr alltoall(const Buffer& send, const Buffer& recv, const AllToAllOptions& opts = {});
  // Counts and displacements in elements, one per rank. The count rank i sends to rank j must
  // equal the count rank j expects from rank i (checked: a mismatch is a MismatchError).
  WorkPtr alltoallv(const Buffer& send, const std::vector<size_t>& send_counts, const std::vector<size_t>& send_displs,
                    const Buffer& recv, const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                    const AllToAllOptions& opts = {});
  WorkPtr barrier(const BarrierOptions& opts = {});
  WorkPtr send(const Buffer& buf, int dst, const SendOptions& opts = {});
  // `src` may be kAnySource: the receive takes the next message with opts.tag that any rank
  // sends this rank (its size must equal buf's, as for a named source), and the Work's
  // source_rank() says which rank sent it. Unlike a receive from a named rank, it holds the
  // group's later operations until such a message has arrived (docs/ARCHITECTURE.md,
  // "Point-to-point").
  WorkPtr recv(const Buffer& buf, int src, const RecvOptions& opts = {});

  // Collective over this group. Ranks with the same color form a new group ordered by (key,
  // rank); color < 0 takes no part and gets nullptr. Every member of a color must pass the same
  // share_connections (checked: InvalidArgument on every member otherwise).
  std::shared_ptr<ProcessGroup> split(int color, int key, const SplitOptions& opts = {});
  // Collective over this group: every rank calls it with the same list; members get the new
  // group (rank = position in the list), others nullptr.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, const SplitOptions& opts = {});
  // new_group for a framework whose subgroups are made by their members alone (torch's new_group
  // hands a backend a store, its rank and the size, not the parent): NOT collective over this
  // group, only the members call it, each with the same `ranks` (ranks of this group, in the new
  // group's order; this rank among them), and in the same order as their other calls with the
  // same list. When sharing is asked for (opts.share_connections, else KOLO_SPLIT_SHARE) it returns
  // a subgroup sharing this group's connections (see SplitOptions), exchanging nothing; otherwise
  // nullptr, and the caller makes an ordinary group as it would have.
  std::shared_ptr<ProcessGroup> subgroup_of_members(const std::vector<int>& ranks, const SplitOptions& opts = {});

  // Lose a rank, keep going: the ranks still alive agree through the store on who is left and
  // form a new group of them (its rank i is the i-th survivor in this group's rank order; its
  // generation() is one more than this group's). Collective over the survivors, each calling it
  // once on this group. This group is aborted first: its operations in flight end with the
  // failure's error (or an abort naming the shrink), later ones fail at once; drop it after.
  // (On a group that shares connections (SplitOptions), that aborts every group on them.)
  // The store must outlive the lost ranks: kolorun hosts it (KOLO_STORE_ADDR), torchrun's agent
  // does; a store hosted by a lost rank 0 ends every shrink with the store's error.
  //
  // Whoever answers: the members are the ranks that call shrink before the lowest of them
  // decides, which it does once every rank not reported lost (the ranks this group's failure
  // blamed, on any caller) has answered, or when the timeout has passed. A rank that calls it
  // after the decision (one that was stopped, say) gets ExcludedError naming the generation.
  std::shared_ptr<ProcessGroup> shrink(const ShrinkOptions& opts = {});
  // Named survivors: every rank not in `exclude_ranks` (ranks of this group) is a member; they
  // must all call it with the same list within the timeout (TimeoutError naming the missing
  // ranks otherwise; InvalidArgument if the lists differ). An excluded rank that calls it gets
  // nullptr (its copy of this group is aborted all the same).
  std::shared_ptr<ProcessGroup> shrink(const std::vector<int>& exclude_ranks, const ShrinkOptions& opts = {});
  // 0 for a group made by create() or split(); one more than its parent's for a shrunk or grown group.
  int generation() const;

  // Let processes waiting in join() in (NCCL's ncclCommGrow, through the store). Collective
  // over this group, at a point every member reaches (a trainer's step boundary): rank 0 alone
  // claims the waiting joiners in arrival order (up to opts.max_joiners), and tells the others
  // by a broadcast of 32 bytes on this group. Nobody waiting: every member gets nullptr. Else a
  // new group, generation() + 1, in which every member keeps its rank and the joiners follow
  // (rank size(), size() + 1, ... in arrival order); it connects afresh (bounded by
  // opts.timeout), and the joiners hold nothing yet: broadcast them what they need (parameters,
  // optimizer state). This group stays usable; drop it once done (its shutdown is collective
  // over the old members).
  // Cost with nobody waiting: one store call on rank 0 (reading the joiners' counter: a round
  // trip to the store) and the broadcast; at 4 ranks on one host about 17 us per call over shm,
  // 50-110 us over tcp (docs/RELIABILITY.md, "Growing back").
  // A member that fails in it (rank 0 died, say) fails the group as any collective does: shrink.
  std::shared_ptr<ProcessGroup> grow(const GrowOptions& opts = {});
  // A process that was not in the group asks to join it (a replacement for a lost rank): it
  // takes a place in the queue in `store` and waits until the members' grow() admits it, then
  // connects with them and returns its group (rank and generation as the members decided).
  // `group` names the group as the members' create() did (name, secret, transport; the n-th
  // group created or joined under a name in a process is the n-th in every process), and its
  // timeout is the new group's. Throws TimeoutError when nobody admitted it in time (it then
  // leaves the queue, so it is never admitted later), and ExcludedError when the group was shut
  // down before admitting it (a replacement that came too late); both name the group.
  static std::shared_ptr<ProcessGroup> join(std::shared_ptr<Store> store, const GroupOptions& group = {},
                                            const JoinOptions& opts = {});

  // Fails every queued and running operation with `reason` and tells the peers; not orderly.
  // On a group that shares connections (SplitOptions), it fails every group on them.
  void abort(const std::string& reason = "aborted by the user");
  // Waits for queued operations, says goodbye to every peer and closes connections. Collective.
  // Throws if a peer reported a failure during the goodbye (a rank whose last operation could
  // not see its peer's error, like a broadcast root, learns of it here).
  void shutdown();

  // Internal: groups are made by create(), split() and new_group(); Impl is private to the library.
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// What init_from_env found: torchrun's MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK/
// LOCAL_WORLD_SIZE, else Open MPI's OMPI_COMM_WORLD_*, else Slurm's SLURM_PROCID/SLURM_NTASKS/...
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  std::string source;  // "torchrun", "openmpi", "slurm" or "default"
  // torchrun's agent already hosts a c10d TCPStore at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE): every rank joins it as a client, under store_prefix.
  bool agent_store = false;
  std::string store_prefix;  // "kolo/attempt_<TORCHELASTIC_RESTART_COUNT>" with the agent store
  // KOLO_STORE_ADDR=host:port: the launcher (kolorun) hosts kolo's store there, so that it
  // outlives every rank (ProcessGroup::shrink needs it): every rank joins it as a client, and
  // MASTER_ADDR:MASTER_PORT is left to the program (a torch store, say). store_port 0: unset.
  std::string store_host;
  uint16_t store_port = 0;
  // KOLO_JOIN=1: this process replaces a lost rank of a running job (kolorun --replace starts
  // it so): it calls join_from_env, not init_from_env. RANK is the lost rank's, for its logs.
  bool join = false;
};
LaunchEnv read_launch_env();

// Reads the launch environment, rank 0 starts a TCPStore server at MASTER_ADDR:MASTER_PORT (or,
// under torchrun's agent store or kolorun's KOLO_STORE_ADDR, every rank joins that one), and all
// ranks form the world group.
std::shared_ptr<ProcessGroup> init_from_env(const GroupOptions& opts = {});
// The same store as init_from_env (it must outlive the lost ranks: KOLO_STORE_ADDR or torchrun's
// agent store), then ProcessGroup::join on it: for a process that KOLO_JOIN=1 says replaces one.
std::shared_ptr<ProcessGroup> join_from_env(const GroupOptions& opts = {}, const JoinOptions& join = {});

}  // namespace kolo

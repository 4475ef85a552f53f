// ProcessGroup's entry points: check arguments, stamp a sequence number, pick the algorithm,
// queue the operation on the group's executor and hand back its Work.
#include "kolo/process_group.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "algorithms/algorithm.hpp"
#include "common/log.hpp"
#include "engine/bootstrap.hpp"
#include "common/config.hpp"
#include "common/crypto.hpp"
#include "engine/executor.hpp"
#include "engine/shared_group.hpp"
#include "engine/grow.hpp"
#include "engine/shrink.hpp"
#include "engine/spare_works.hpp"
#include "engine/device_issue.hpp"
#include "engine/validate.hpp"

namespace kolo {

using algo::CollArgs;
using algo::CollKind;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds default_group_timeout();
std::chrono::milliseconds default_group_timeout() {
  double secs = std::stod(config::get_string("KOLO_TIMEOUT"));
  if (secs <= 0) throw InvalidArgument("KOLO_TIMEOUT must be positive");
  return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
}

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
  int shrink_attempts = 0;  // under mu: a failed attempt (a member died while connecting) may be retried
  int shrunk_to = 0;        // under mu: the generation this group shrank to, 0 if none
  // Growing (grow.hpp): the joiners' queue lives under "<root_prefix>/join".
  int grown_to = 0;         // under mu: the generation this group grew to, 0 if none
  bool joinable = false;    // under mu: grow or join was used on this line, so its end is announced there
  int64_t next_ticket = 1;  // under mu: rank 0's first joiner ticket not yet settled

  // `var_counts`: alltoallv's, which args.v points to (the task keeps them); null otherwise.
  // `gate`: what the operation waits for before it starts (a device operation's inputs).
  WorkPtr issue(const CollArgs& args, const Buffer& send, const Buffer& recv, const CommonOptions& opts,
                std::shared_ptr<const algo::VarCounts>* var_counts = nullptr, engine::RunGate* gate = nullptr);
  // An operation whose buffers are device memory: staged through a pinned block (device_issue.hpp).
  WorkPtr issue_device(const CollArgs& args, const Buffer& send, const Buffer& recv, const CommonOptions& opts,
                       std::shared_ptr<const algo::VarCounts>* var_counts);
  engine::GroupDevice device;
};

// Groups created under one name get distinct store prefixes, in the same order on every rank.
static std::string next_prefix(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, int> counts;
  std::lock_guard<std::mutex> lk(mu);
  return "kolo/" + name + "/" + std::to_string(counts[name]++);
}

static std::shared_ptr<ProcessGroup> make_group(std::unique_ptr<ProcessGroup::Impl> impl);

// "group-" and 12 hex digits of SHA-256(secret, prefix): every rank of a group agreed on both,
// and another job has another secret; the secret itself cannot be read back from it.
static std::string job_tag(const engine::Secret& secret, const std::string& prefix) {
  const auto d = crypto::sha256(std::string(secret.begin(), secret.end()) + prefix);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "group-";
  for (size_t i = 0; i < 6; ++i) {
    out += kHex[d[i] >> 4];
    out += kHex[d[i] & 15];
  }
  return out;
}

static std::unique_ptr<ProcessGroup::Impl> connect_impl(std::shared_ptr<Store> store, const std::string& prefix,
                                                         const std::string& name, int rank, int size,
                                                         std::chrono::milliseconds timeout, const engine::Secret* secret,
                                                         const std::string& secret_text, const std::string& transport,
                                                         std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(0)) {
  auto impl = std::make_unique<ProcessGroup::Impl>();
  impl->store = store;
  impl->prefix = prefix;
  impl->name = name;
  impl->root_prefix = prefix;
  impl->root_name = name;
  impl->rank = rank;
  impl->size = size;
  impl->timeout = timeout;
  impl->transport = transport;
  impl->secret = secret ? *secret : engine::agree_secret(*store, prefix, rank, secret_text);
  impl->send_seq.assign(static_cast<size_t>(size), 0);
  impl->recv_seq.assign(static_cast<size_t>(size), 0);
  const auto connect_for = connect_timeout.count() > 0 ? connect_timeout : timeout;
  auto connected = engine::connect_group(*store, prefix, rank, size, impl->secret, Clock::now() + connect_for, transport);
  impl->host_ids = connected.host_ids;
  impl->hosts = impl->host_ids.size() == static_cast<size_t>(size) ? algo::HostLayout::from_ids(impl->host_ids)
                                                                   : algo::HostLayout::single_host(size);
  engine::GroupInfo info;
  info.name = name;
  info.rank = rank;
  info.size = size;
  info.hosts = impl->hosts;
  info.blame = engine::BlameBoard::from_config(store, prefix, rank, size);
  info.job = job_tag(impl->secret, prefix);
  impl->executor = std::make_shared<engine::Executor>(std::move(connected.ctx), std::move(info), timeout);
  impl->executor->name_group(0, name);
  impl->connections = std::make_shared<SharedConnections>(impl->executor);
  std::weak_ptr<engine::Executor> executor = impl->executor;
  impl->device.direct.configure(store, prefix, rank, size, impl->hosts.num_hosts() == 1, true, timeout, [executor] {
    auto e = executor.lock();
    return !e || e->failed() ? std::string("the group has failed (a peer died or aborted: its next call says which)")
                             : std::string();
  });
  return impl;
}

// A subgroup that runs on `parent`'s connections and executor: no connection, no thread, no
// store traffic (the blame board's keys are written only after a timeout).
static std::unique_ptr<ProcessGroup::Impl> share_impl(const ProcessGroup::Impl& parent, const std::string& prefix,
                                                       const std::string& name, int rank,
                                                       const std::vector<int>& parent_ranks,
                                                       std::chrono::milliseconds timeout) {
  auto impl = std::make_unique<ProcessGroup::Impl>();
  const int size = static_cast<int>(parent_ranks.size());
  impl->store = parent.store;
  impl->prefix = prefix;
  impl->name = name;
  impl->root_prefix = prefix;
  impl->root_name = name;
  impl->rank = rank;
  impl->size = size;
  impl->timeout = timeout;
  impl->transport = parent.transport;
  impl->secret = parent.secret;
  impl->send_seq.assign(static_cast<size_t>(size), 0);
  impl->recv_seq.assign(static_cast<size_t>(size), 0);
  if (parent.host_ids.size() == static_cast<size_t>(parent.size))
    for (int r : parent_ranks) impl->host_ids.push_back(parent.host_ids[static_cast<size_t>(r)]);
  impl->hosts = impl->host_ids.size() == static_cast<size_t>(size) ? algo::HostLayout::from_ids(impl->host_ids)
                                                                   : algo::HostLayout::single_host(size);
  impl->executor = parent.executor;
  impl->connections = parent.connections;
  const engine::GroupInfo& owner = parent.executor->group();
  const engine::GroupInfo& above = parent.shared ? *parent.shared : owner;
  impl->shared = engine::make_shared_group(above, owner.size, name, prefix, rank, parent_ranks, impl->hosts,
                                           engine::BlameBoard::from_config(parent.store, prefix, rank, size));
  impl->executor->name_group(impl->shared->id, name);
  return impl;
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(std::shared_ptr<Store> store, int rank, int size, const GroupOptions& opts) {
  if (!store) throw InvalidArgument("kolo: ProcessGroup::create needs a store");
  if (size < 1) throw InvalidArgument("kolo: group size must be at least 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size)
    throw InvalidArgument("kolo: rank " + std::to_string(rank) + " is outside a group of " + std::to_string(size));
  log::set_process_rank(rank);
  auto timeout = opts.timeout.count() > 0 ? opts.timeout : default_group_timeout();
  std::string transport = opts.transport.empty() ? config::get_string("KOLO_TRANSPORT") : opts.transport;
  return make_group(connect_impl(store, next_prefix(opts.name), opts.name, rank, size, timeout, nullptr, opts.secret, transport));
}

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

static std::shared_ptr<ProcessGroup> make_group(std::unique_ptr<ProcessGroup::Impl> impl) {
  return std::make_shared<ProcessGroup>(std::move(impl));
}

ProcessGroup::~ProcessGroup() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    KOLO_LOG(warn, "shutdown of group " << impl_->name << " failed: " << e.what());
  }
}

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }
const std::string& ProcessGroup::name() const { return impl_->name; }
int ProcessGroup::generation() const { return impl_->generation; }

// A collective whose count is zero moves nothing on any rank (every rank passes the same count:
// it is the per-rank or per-block count), so it needs no message: like MPI and NCCL, kolo runs
// nothing for it. Not a barrier (it synchronizes), not alltoallv (its counts differ per rank),
// not a send or receive (a zero-byte message is still a message the peer waits for).
static bool moves_nothing(const CollArgs& a) {
  switch (a.kind) {
    case CollKind::broadcast: case CollKind::allreduce: case CollKind::reduce: case CollKind::allgather:
    case CollKind::gather: case CollKind::scatter: case CollKind::reduce_scatter: case CollKind::alltoall:
      return a.count == 0;
    default:
      return false;
  }
}

// What runs for a collective that moves nothing when it cannot complete at issue (an earlier
// collective is still queued or running, and issue order must hold): nothing, in its turn.
static void run_nothing(algo::Comm&) {}
// Not registered: no rank chooses it, and its stamp is never sent.
static const algo::Algorithm kNothingToMove{.name = "none (count 0)", .wire_id = 255, .serves = {}, .run = run_nothing};

WorkPtr ProcessGroup::Impl::issue_device(const CollArgs& args, const Buffer& send, const Buffer& recv,
                                         const CommonOptions& opts, std::shared_ptr<const algo::VarCounts>* var_counts) {
  const engine::CheckedDevice checked = engine::check_device_operation(device, args, send, recv, rank, size);
  if (checked.rt != nullptr && device.direct.wants(args, *checked.rt) && !executor->failed()) {
    // Straight between the node's processes' device memory (device_direct.hpp): numbered like
    // every collective, run by this thread on the caller's stream.
    uint64_t seq;
    {
      auto lk = executor->lock_queue();
      if (shut_down) throw Error(std::string("kolo: ") + algo::coll_name(args.kind) + " on group " + name + " after shutdown()");
      seq = coll_seq++;
    }
    engine::DeviceCurrent current(*checked.rt, checked.device.index);
    try {
      return device.direct.run(args, *checked.rt, opts.stream, seq);
    } catch (const std::exception& e) {
      executor->request_abort(e.what());  // the peers learn it too; later calls fail at once
      throw;
    }
  }
  engine::StagedOperation staged =
      engine::stage_device_operation(device, checked, args, send, recv, opts, rank, size);
  if (!staged.work) {  // only host memory is used here
    const engine::HostOperation& h = staged.host[0];
    return issue(h.args, h.send, h.recv, opts, var_counts);
  }
  // Always on the engine thread: wait() does not block the host, so no caller would run it.
  CommonOptions host_opts = opts;
  host_opts.overlap = true;
  const std::shared_ptr<engine::DeviceWork>& w = staged.work;
  for (size_t i = 0; i < staged.host.size(); ++i) {
    const engine::HostOperation& h = staged.host[i];
    engine::DeviceWork::Part& part = w->parts[i];
    WorkPtr host;
    try {
      host = issue(h.args, h.send, h.recv, host_opts, var_counts, part.needs_gate() ? &part : nullptr);
    } catch (...) {
      // The GPU side is queued already: a part that will never run must still raise its flag,
      // or the copy stream, and with it every later synchronization of the device (cudaFree
      // too), would wait forever. Seen on an H200: the call after a failure hung the process.
      for (size_t j = i; j < staged.host.size(); ++j) w->deliver(j, std::current_exception());
      throw;
    }
    if (i == 0) engine::WorkAccess::set_seq(*w, host->seq());
    // Each part's end delivers its result to device memory; the callback keeps the DeviceWork
    // (and the gate the engine may still be using) alive until then.
    host->on_complete([w, i](Work& done) { w->deliver(i, done.exception()); });
  }
  return staged.work;
}

WorkPtr ProcessGroup::Impl::issue(const CollArgs& args, const Buffer& send, const Buffer& recv, const CommonOptions& opts,
                                  std::shared_ptr<const algo::VarCounts>* var_counts, engine::RunGate* gate) {
  if (!send.device.is_cpu() || !recv.device.is_cpu()) return issue_device(args, send, recv, opts, var_counts);
  engine::validate(args, send, recv, rank, size);
  // A receive from any source runs its algorithm like a collective (to completion, in issue
  // order: recv_any.cpp) but is stamped like a point-to-point message.
  const bool any_source = args.kind == CollKind::recv && args.root == kAnySource;
  const bool p2p = args.kind == CollKind::send || (args.kind == CollKind::recv && !any_source);
  const bool empty = moves_nothing(args);
  auto lk = executor->lock_queue();
  if (shut_down) throw Error(std::string("kolo: ") + algo::coll_name(args.kind) + " on group " + name + " after shutdown()");
  const algo::Algorithm* algorithm = nullptr;
  algo::SelectionMemo::Choice choice{nullptr, 0};
  if (any_source) {
    algorithm = algo::find_algorithm(CollKind::recv, "any");
  } else if (empty) {
    algorithm = &kNothingToMove;
  } else if (!p2p) {
    choice = chosen.choose(args, hosts, opts.algorithm, selection);
    algorithm = choice.algorithm;
  }
  uint64_t seq;
  if (any_source) {
    seq = any_source_seq++;
  } else if (p2p) {
    // Both directions of a pair count their own messages.
    auto& counter = args.kind == CollKind::send ? send_seq : recv_seq;
    seq = counter[static_cast<size_t>(args.root)]++;
  } else {
    seq = coll_seq++;
  }
  // The Work and its task, in one block: the last operation's again when its caller is done with
  // it, or a new one from the pool; the task (and its stamp) is filled in place.
  const char* op_name = algo::coll_name(args.kind);
  std::shared_ptr<engine::Operation> op = shared ? nullptr : spares.take(op_name, seq);
  if (!op) op = engine::WorkAccess::make_in_pool<engine::Operation>(works, op_name, seq);
  engine::Task& t = op->task;
  t.type = p2p ? engine::Task::Type::point_to_point : engine::Task::Type::collective;
  t.algorithm = algorithm;
  engine::Stamp& s = t.stamp;
  s.seq = seq;
  s.group = shared ? shared->id : 0;
  s.dtype = args.dtype;
  s.count = args.count;
  if (any_source || p2p) {
    // The receiver's stamp must match the sender's, so both use the kind "send"; a receive from
    // any source stamps what its sender does (the pair's number is set once chosen).
    s.kind = CollKind::send;
    s.op = ReduceKind::sum;
    s.algo_id = 0;
    s.root_or_tag = args.tag;
  } else {
    s.kind = args.kind;
    bool reduces = args.kind == CollKind::allreduce || args.kind == CollKind::reduce || args.kind == CollKind::reduce_scatter;
    s.op = reduces ? args.op.kind : ReduceKind::sum;
    s.algo_id = choice.wire_id;
    s.root_or_tag = static_cast<uint32_t>(args.root);
  }
  t.timeout = opts.timeout.count() > 0 ? opts.timeout : timeout;
  t.overlap = opts.overlap;
  t.gate = gate;
  if (shared) t.group = shared;
  if (p2p && args.kind == CollKind::recv) engine::WorkAccess::set_source_rank(*op, args.root);
  t.args = args;
  if (var_counts) t.var_counts = std::move(*var_counts);
  if (shared) last = op;
  if (empty && executor->collectives_done(lk) && !executor->failed()) {
    // Every earlier collective has completed and nothing is to move: complete now, without the
    // queue, the flight recorder or a look at the transports (a failed group takes the queue,
    // which reports the failure).
    engine::WorkAccess::finish(*op, nullptr);
    return op;
  }
  if (!executor->run_direct(t, op, lk)) executor->submit(t, op, lk);  // the engine's reference; unlocks
  return op;
}

// A buffer a non-root rank passed empty, given the dtype of the one it passed for real: its
// dtype must not fail the check that both buffers hold the same type.
static Buffer like(const Buffer& b, DataType dtype) {
  Buffer c = b;
  c.dtype = dtype;
  return c;
}

static CollArgs make_args(CollKind kind, const Buffer& send, const Buffer& recv, size_t count) {
  CollArgs a;
  a.kind = kind;
  a.dtype = send.ptr || send.count ? send.dtype : recv.dtype;
  a.send = send.ptr;
  a.recv = recv.ptr;
  a.count = count;
  return a;
}

WorkPtr ProcessGroup::broadcast(const Buffer& buf, const BroadcastOptions& opts) {
  CollArgs a = make_args(CollKind::broadcast, buf, buf, buf.count);
  a.root = opts.root;
  return impl_->issue(a, buf, buf, opts);
}

WorkPtr ProcessGroup::allreduce(const Buffer& send, const Buffer& recv, const AllreduceOptions& opts) {
  CollArgs a = make_args(CollKind::allreduce, send, recv, send.count);
  a.op = opts.op;
  return impl_->issue(a, send, recv, opts);
}

WorkPtr ProcessGroup::reduce(const Buffer& send, const Buffer& recv, const ReduceOptions& opts) {
  CollArgs a = make_args(CollKind::reduce, send, recv, send.count);
  a.op = opts.op;
  a.root = opts.root;
  if (rank() != opts.root && recv.ptr == nullptr) return impl_->issue(a, send, like(recv, send.dtype), opts);
  return impl_->issue(a, send, recv, opts);
}

WorkPtr ProcessGroup::allgather(const Buffer& send, const Buffer& recv, const AllgatherOptions& opts) {
  return impl_->issue(make_args(CollKind::allgather, send, recv, send.count), send, recv, opts);
}

WorkPtr ProcessGroup::gather(const Buffer& send, const Buffer& recv, const GatherOptions& opts) {
  CollArgs a = make_args(CollKind::gather, send, recv, send.count);
  a.root = opts.root;
  if (rank() != opts.root && recv.ptr == nullptr) return impl_->issue(a, send, like(recv, send.dtype), opts);
  return impl_->issue(a, send, recv, opts);
}

WorkPtr ProcessGroup::scatter(const Buffer& send, const Buffer& recv, const ScatterOptions& opts) {
  CollArgs a = make_args(CollKind::scatter, recv, recv, recv.count);
  a.send = send.ptr;
  a.root = opts.root;
  if (rank() != opts.root && send.ptr == nullptr) return impl_->issue(a, like(send, recv.dtype), recv, opts);
  return impl_->issue(a, send, recv, opts);
}

WorkPtr ProcessGroup::reduce_scatter(const Buffer& send, const Buffer& recv, const ReduceScatterOptions& opts) {
  CollArgs a = make_args(CollKind::reduce_scatter, send, recv, recv.count);
  a.op = opts.op;
  return impl_->issue(a, send, recv, opts);
}

WorkPtr ProcessGroup::alltoall(const Buffer& send, const Buffer& recv, const AllToAllOptions& opts) {
  size_t n = static_cast<size_t>(size());
  if (send.count % n != 0)
    throw InvalidArgument("kolo: alltoall refused: send count " + std::to_string(send.count) + " is not a multiple of the group size " +
                          std::to_string(n));
  if (recv.count != send.count)
    throw InvalidArgument("kolo: alltoall refused: receive count " + std::to_string(recv.count) + " differs from send count " +
                          std::to_string(send.count));
  return impl_->issue(make_args(CollKind::alltoall, send, recv, send.count / n), send, recv, opts);
}

WorkPtr ProcessGroup::alltoallv(const Buffer& send, const std::vector<size_t>& send_counts, const std::vector<size_t>& send_displs,
                                const Buffer& recv, const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                                const AllToAllOptions& opts) {
  CollArgs a = make_args(CollKind::alltoallv, send, recv, 0);
  auto counts = std::make_shared<const algo::VarCounts>(algo::VarCounts{send_counts, send_displs, recv_counts, recv_displs});
  a.v = counts.get();
  return impl_->issue(a, send, recv, opts, &counts);
}

WorkPtr ProcessGroup::barrier(const BarrierOptions& opts) {
  CollArgs a;
  a.kind = CollKind::barrier;
  a.dtype = DataType::uint8;
  return impl_->issue(a, Buffer(), Buffer(), opts);
}

WorkPtr ProcessGroup::send(const Buffer& buf, int dst, const SendOptions& opts) {
  CollArgs a = make_args(CollKind::send, buf, Buffer(), buf.count);
  a.root = dst;
  a.tag = opts.tag;
  return impl_->issue(a, buf, Buffer(), opts);
}

WorkPtr ProcessGroup::recv(const Buffer& buf, int src, const RecvOptions& opts) {
  CollArgs a = make_args(CollKind::recv, buf, buf, buf.count);
  a.send = nullptr;
  a.root = src;
  a.tag = opts.tag;
  return impl_->issue(a, Buffer(), buf, opts);
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key, const SplitOptions& opts) {
  // Everyone learns everyone's (color, key, share) through this group, then each color connects
  // anew or runs on this group's connections.
  const size_t n = static_cast<size_t>(size());
  const bool share = opts.share_connections.value_or(config::get_int("KOLO_SPLIT_SHARE") != 0);
  int64_t mine[3] = {color, key, share ? 1 : 0};
  std::vector<int64_t> all(3 * n);
  allgather(Buffer(mine, 3), Buffer(all.data(), all.size()))->wait();
  int index;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    index = impl_->split_count++;
  }
  if (color < 0) return nullptr;
  std::vector<std::pair<int64_t, int>> members;  // (key, parent rank)
  std::string disagree;
  for (size_t r = 0; r < n; ++r) {
    if (all[3 * r] != color) continue;
    members.emplace_back(all[3 * r + 1], static_cast<int>(r));
    if ((all[3 * r + 2] != 0) != share) disagree += (disagree.empty() ? "" : ", ") + std::to_string(r);
  }
  // Half a color sharing and half connecting would wait for connections that never come.
  if (!disagree.empty())
    throw InvalidArgument("kolo: split of group " + name() + " refused: rank(s) " + disagree + " of color " +
                          std::to_string(color) + " asked for share_connections " + (share ? "false" : "true") +
                          " where this rank asked for " + (share ? "true" : "false") +
                          " (SplitOptions.share_connections or KOLO_SPLIT_SHARE must agree)");
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  std::vector<int> parent_ranks;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == rank()) new_rank = static_cast<int>(i);
    parent_ranks.push_back(members[i].second);
  }
  std::string suffix = "split" + std::to_string(index) + ".color" + std::to_string(color);
  const auto timeout = opts.timeout.count() > 0 ? opts.timeout : impl_->timeout;
  if (share)
    return make_group(share_impl(*impl_, impl_->prefix + "/" + suffix, impl_->name + "/" + suffix, new_rank, parent_ranks,
                                 timeout));
  return make_group(connect_impl(impl_->store, impl_->prefix + "/" + suffix, impl_->name + "/" + suffix, new_rank,
                                 static_cast<int>(members.size()), timeout, &impl_->secret, "", impl_->transport));
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, const SplitOptions& opts) {
  std::vector<int> seen(static_cast<size_t>(size()), 0);
  for (int r : ranks) {
    if (r < 0 || r >= size())
      throw InvalidArgument("kolo: new_group refused: rank " + std::to_string(r) + " is not in this group of " + std::to_string(size()));
    if (seen[static_cast<size_t>(r)]++) throw InvalidArgument("kolo: new_group refused: rank " + std::to_string(r) + " listed twice");
  }
  auto pos = std::find(ranks.begin(), ranks.end(), rank());
  int color = pos == ranks.end() ? -1 : 0;
  int key = pos == ranks.end() ? 0 : static_cast<int>(pos - ranks.begin());
  return split(color, key, opts);
}

std::shared_ptr<ProcessGroup> ProcessGroup::subgroup_of_members(const std::vector<int>& ranks, const SplitOptions& opts) {
  if (!opts.share_connections.value_or(config::get_int("KOLO_SPLIT_SHARE") != 0)) return nullptr;
  std::vector<int> seen(static_cast<size_t>(size()), 0);
  std::string list;
  int me = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= size())
      throw InvalidArgument("kolo: subgroup_of_members refused: rank " + std::to_string(r) + " is not in group " + name() +
                            " of " + std::to_string(size()));
    if (seen[static_cast<size_t>(r)]++)
      throw InvalidArgument("kolo: subgroup_of_members refused: rank " + std::to_string(r) + " listed twice");
    if (r == rank()) me = static_cast<int>(i);
    list += (list.empty() ? "" : ",") + std::to_string(r);
  }
  if (me < 0)
    throw InvalidArgument("kolo: subgroup_of_members refused: rank " + std::to_string(rank()) + " of group " + name() +
                          " is not in the list (only members call it)");
  int occurrence;
  {
    auto queue_lock = impl_->executor->lock_queue();
    if (impl_->shut_down) throw Error("kolo: subgroup_of_members on group " + name() + " after shutdown()");
  }
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    occurrence = impl_->member_subgroups[ranks]++;
  }
  // Every member has made the same number of subgroups with this exact list before: the same
  // name (and so the same tag id) on every member, without a word exchanged.
  const std::string suffix = "members[" + list + "]." + std::to_string(occurrence);
  const auto timeout = opts.timeout.count() > 0 ? opts.timeout : impl_->timeout;
  return make_group(share_impl(*impl_, impl_->prefix + "/" + suffix, impl_->name + "/" + suffix, me, ranks, timeout));
}

// The ranks of `impl`'s group that its failure blamed (none before a failure): a peer whose
// connection closed, and the culprit the group's error named. Never this rank, and never a rank
// that only aborted itself: it may be shrinking too (and is then present before it aborts).
static std::vector<int> ranks_blamed(const ProcessGroup::Impl& impl) {
  std::vector<int> out;
  const engine::GroupInfo& g = impl.shared ? *impl.shared : impl.executor->group();
  auto add = [&](int ctx_peer) {
    const int r = g.from_ctx_peer(ctx_peer);
    if (r >= 0 && r < impl.size && r != impl.rank && std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  };
  if (impl.executor->context_failed()) {
    const engine::PeerFailure f = impl.executor->context_failure();
    if (f.why != transport::Failure::aborted) add(f.peer);
  }
  add(impl.executor->failure_culprit());
  std::sort(out.begin(), out.end());
  return out;
}

static std::shared_ptr<ProcessGroup> shrink_group(ProcessGroup::Impl& impl, const std::optional<std::vector<int>>& exclude,
                                                  const ShrinkOptions& opts) {
  if (exclude) {
    std::vector<int> seen(static_cast<size_t>(impl.size), 0);
    for (int r : *exclude) {
      if (r < 0 || r >= impl.size)
        throw InvalidArgument("kolo: shrink of group " + impl.name + " refused: rank " + std::to_string(r) +
                              " is not in this group of " + std::to_string(impl.size));
      if (seen[static_cast<size_t>(r)]++)
        throw InvalidArgument("kolo: shrink of group " + impl.name + " refused: rank " + std::to_string(r) + " excluded twice");
    }
    if (exclude->size() == static_cast<size_t>(impl.size))
      throw InvalidArgument("kolo: shrink of group " + impl.name + " refused: it excludes every rank");
  }
  int attempt;
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    if (impl.shrunk_to > 0)
      throw Error("kolo: group " + impl.name + " already shrank to generation " + std::to_string(impl.shrunk_to) +
                  ": shrink that group instead");
    attempt = impl.shrink_attempts++;
  }
  const int generation = impl.generation + 1 + attempt;
  const std::string abort_reason = "kolo: rank " + std::to_string(impl.rank) + " of group " + impl.name +
                                   " aborted: shrinking to generation " + std::to_string(generation);
  // A rank the caller named excluded takes no part: its copy of the group ends here.
  if (exclude && std::find(exclude->begin(), exclude->end(), impl.rank) != exclude->end()) {
    impl.executor->request_abort(abort_reason);
    return nullptr;
  }
  const auto timeout = opts.timeout.count() > 0 ? opts.timeout : impl.timeout;
  engine::ShrinkRequest req;
  req.ns = impl.root_prefix + "/gen" + std::to_string(generation) + "/shrink";
  req.generation = generation;
  req.group = impl.name;
  req.rank = impl.rank;
  req.size = impl.size;
  req.exclude = exclude;
  req.lost = ranks_blamed(impl);  // before this rank's own abort becomes the group's failure
  req.deadline = Clock::now() + timeout;
  req.takeover = std::clamp(timeout / 8, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
  // Present first, aborted second: a peer that learns of this rank only from its abort notice
  // blames it, but finds it present.
  const std::vector<int> members =
      engine::agree_survivors(*impl.store, req, [&] { impl.executor->request_abort(abort_reason); });
  const int new_rank = static_cast<int>(std::find(members.begin(), members.end(), impl.rank) - members.begin());
  const std::string suffix = "/gen" + std::to_string(generation);
  // A fresh bootstrap under the generation's prefix: the old connections are aborted (a
  // transport that could hand over its survivors' pairs would save this; none does yet).
  auto next = connect_impl(impl.store, impl.root_prefix + suffix, impl.root_name + suffix, new_rank,
                           static_cast<int>(members.size()), impl.timeout, &impl.secret, "", impl.transport, timeout);
  next->root_prefix = impl.root_prefix;
  next->root_name = impl.root_name;
  next->generation = generation;
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    impl.shrunk_to = generation;
    next->joinable = impl.joinable;
    next->next_ticket = impl.next_ticket;
  }
  KOLO_LOG(info, "group " << impl.name << ": rank " << impl.rank << " is rank " << new_rank << " of "
                          << members.size() << " in generation " << generation << " (" << impl.root_name << suffix << ")");
  return make_group(std::move(next));
}

std::shared_ptr<ProcessGroup> ProcessGroup::shrink(const ShrinkOptions& opts) { return shrink_group(*impl_, std::nullopt, opts); }

std::shared_ptr<ProcessGroup> ProcessGroup::shrink(const std::vector<int>& exclude_ranks, const ShrinkOptions& opts) {
  return shrink_group(*impl_, exclude_ranks, opts);
}

std::shared_ptr<ProcessGroup> ProcessGroup::grow(const GrowOptions& opts) {
  Impl& impl = *impl_;
  if (opts.wait.count() < 0 || opts.timeout.count() < 0 || opts.max_joiners < 0)
    throw InvalidArgument("kolo: grow of group " + impl.name + " refused: negative wait, timeout or max_joiners");
  const int generation = impl.generation + 1;
  int64_t next_ticket;
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    impl.joinable = true;
    next_ticket = impl.next_ticket;
  }
  // Rank 0 decides; the others learn {joiners admitted, round, size, generation} (joiners -1:
  // rank 0 failed to decide, its own exception says why).
  int64_t decision[4] = {0, 0, impl.size, generation};
  std::exception_ptr failed;
  if (impl.rank == 0) {
    engine::AdmitRequest req;
    req.ns = impl.root_prefix + "/join";
    req.group = impl.name;
    req.generation = generation;
    req.members = impl.size;
    req.max_joiners = opts.max_joiners;
    req.wait_until = Clock::now() + opts.wait;
    try {
      const engine::Admission a = engine::admit_joiners(*impl.store, req, next_ticket);
      decision[0] = static_cast<int64_t>(a.tickets.size());
      decision[1] = a.round;
      decision[2] = a.size;
      std::lock_guard<std::mutex> lk(impl.mu);
      impl.next_ticket = next_ticket;
    } catch (...) {
      failed = std::current_exception();
      decision[0] = -1;
    }
  }
  BroadcastOptions bo;
  bo.timeout = (impl.timeout > std::chrono::milliseconds(0) ? impl.timeout : default_group_timeout()) + opts.wait;
  broadcast(Buffer(decision, 4), bo)->wait();
  if (failed) std::rethrow_exception(failed);
  if (decision[0] < 0)
    throw Error("kolo: grow of group " + impl.name + " to generation " + std::to_string(generation) +
                ": rank 0 could not decide which joiners to admit (its error says why)");
  if (decision[0] == 0) return nullptr;
  if (decision[3] != generation)
    throw InvalidArgument("kolo: grow of group " + impl.name + ": rank 0 grows generation " + std::to_string(decision[3] - 1) +
                          ", this rank's group is generation " + std::to_string(impl.generation));
  const int size = static_cast<int>(decision[2]);
  const auto timeout = opts.timeout.count() > 0 ? opts.timeout : impl.timeout;
  // A fresh bootstrap under the round's own prefix (never a shrink's "gen<G>": a grow whose
  // connect failed, followed by a shrink to the same generation number, must not meet its keys).
  auto next = connect_impl(impl.store, impl.root_prefix + "/grow" + std::to_string(decision[1]),
                           impl.root_name + "/gen" + std::to_string(generation), impl.rank, size, impl.timeout,
                           &impl.secret, "", impl.transport, timeout);
  next->root_prefix = impl.root_prefix;
  next->root_name = impl.root_name;
  next->generation = generation;
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    impl.grown_to = generation;
    next->joinable = true;
    next->next_ticket = impl.next_ticket;
  }
  KOLO_LOG(info, "group " << impl.name << ": grew to " << size << " ranks in generation " << generation << " ("
                          << decision[0] << " joiner(s)); rank " << impl.rank << " keeps its rank");
  return make_group(std::move(next));
}

std::shared_ptr<ProcessGroup> ProcessGroup::join(std::shared_ptr<Store> store, const GroupOptions& group,
                                                 const JoinOptions& opts) {
  if (!store) throw InvalidArgument("kolo: ProcessGroup::join needs a store");
  if (opts.timeout.count() < 0) throw InvalidArgument("kolo: ProcessGroup::join refused: negative timeout");
  const auto timeout = group.timeout.count() > 0 ? group.timeout : default_group_timeout();
  const std::string transport = group.transport.empty() ? config::get_string("KOLO_TRANSPORT") : group.transport;
  // The line's root, named as the members' create() named it.
  const std::string root = next_prefix(group.name);
  engine::JoinRequest req;
  req.ns = root + "/join";
  req.group = group.name;
  req.deadline = Clock::now() + (opts.timeout.count() > 0 ? opts.timeout : timeout);
  const engine::Admitted a = engine::wait_for_admission(*store, req);
  log::set_process_rank(a.rank);
  // The job's secret: KOLO_SECRET (or group.secret) as the members had it, else the one their
  // rank 0 made and left in the store (agree_secret's rule for a rank other than 0).
  const engine::Secret secret = engine::agree_secret(*store, root, a.rank, group.secret);
  auto impl = connect_impl(store, root + "/grow" + std::to_string(a.round), group.name + "/gen" + std::to_string(a.generation),
                           a.rank, a.size, timeout, &secret, "", transport, timeout);
  impl->root_prefix = root;
  impl->root_name = group.name;
  impl->generation = a.generation;
  impl->joinable = true;
  impl->next_ticket = a.ticket + 1;  // rank 0 settled every ticket before ours when it admitted us
  KOLO_LOG(info, "joined group " << group.name << " as rank " << a.rank << " of " << a.size << " in generation "
                                 << a.generation);
  return make_group(std::move(impl));
}

void ProcessGroup::abort(const std::string& reason) {
  impl_->executor->request_abort("kolo: rank " + std::to_string(rank()) + " of group " + name() + " aborted: " + reason);
}

// The last group of a line that grow or join was used on tells the joiners still waiting that
// nobody will admit them (grow.hpp, "closed"); a group that shrank or grew leaves that to its
// successor. Best effort: the store may be gone with the job.
static void announce_end_of_line(ProcessGroup::Impl& impl) {
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    if (!impl.joinable || impl.rank != 0 || impl.shrunk_to > 0 || impl.grown_to > 0) return;
  }
  try {
    engine::close_line(*impl.store, impl.root_prefix + "/join", impl.generation);
  } catch (const std::exception& e) {
    KOLO_LOG(info, "group " << impl.name << ": could not tell waiting joiners that it ended: " << e.what());
  }
}

void ProcessGroup::shutdown() {
  WorkPtr last;
  {
    auto lk = impl_->executor->lock_queue();
    if (impl_->shut_down) return;
    impl_->shut_down = true;
    last = std::move(impl_->last);
  }
  // A sharing subgroup's operations run on the shared executor: wait for the last one (their
  // errors belong to their Works; the group's own failure, if any, reaches the others too).
  if (last) {
    try {
      last->wait();
    } catch (const std::exception& e) {
      KOLO_LOG(info, "group " << impl_->name << ": its last operation failed before shutdown: " << e.what());
    }
  }
  // The last group on these connections closes them, reporting what went wrong during the
  // goodbye; the others leave them to the groups that still use them.
  // The direct device path's last handshake, while every peer is still there (skipped when the
  // group failed: a peer may be gone).
  impl_->device.direct.close(!impl_->executor->failed());
  announce_end_of_line(*impl_);
  std::shared_ptr<SharedConnections> connections = std::move(impl_->connections);
  if (connections.use_count() == 1) connections->executor->close_and_join();
}

}  // namespace kolo

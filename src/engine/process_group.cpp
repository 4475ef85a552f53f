// ProcessGroup's entry points: check arguments, stamp a sequence number, pick the algorithm,
// queue the operation on the group's executor and hand back its Work.
#include "kolo/process_group.hpp"

#include <algorithm>
#include <atomic>

#include "common/config.hpp"
#include "engine/group_impl.hpp"
#include "engine/validate.hpp"

namespace kolo {

using algo::CollArgs;
using algo::CollKind;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds default_group_timeout() {
  double secs = std::stod(config::get_string("KOLO_TIMEOUT"));
  if (secs <= 0) throw InvalidArgument("KOLO_TIMEOUT must be positive");
  return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000));
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
void ProcessGroup::abort(const std::string& reason) {
  impl_->executor->request_abort("kolo: rank " + std::to_string(rank()) + " of group " + name() + " aborted: " + reason);
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

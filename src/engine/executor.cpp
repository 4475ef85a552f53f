// The executor's queue and the one way an operation runs (docs/ARCHITECTURE.md, "Who runs an
// operation"): issuing (submit), finding and releasing queued operations for whoever runs them,
// running one (run_task: a collective's algorithm on an EngineComm, or a send or receive
// posted), and failing the group. Who runs it is apart: the caller at issue
// (executor_direct.cpp), its waiter (executor_waiter.cpp), the engine thread
// (executor_thread.cpp); posted sends and receives are in executor_pending.cpp.
#include "engine/executor.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include "common/cpu_relax.hpp"
#include "common/log.hpp"
#include "common/config.hpp"
#include "engine/running_operations.hpp"
#include "kernels/device_runtime.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;
using transport::Request;

// Ranks of this group on this process's host (the group's own layout; a group of one host
// when the bootstrap gave no identities).
static int ranks_on_my_host(const GroupInfo& g) {
  if (g.hosts.size() != g.size) return g.size;
  return static_cast<int>(g.hosts.members[static_cast<size_t>(g.hosts.host_of[static_cast<size_t>(g.rank)])].size());
}

Executor::Executor(std::unique_ptr<Context> ctx, GroupInfo group, std::chrono::milliseconds close_timeout)
    : ctx_(std::move(ctx)),
      group_(std::move(group)),
      close_timeout_(close_timeout),
      fr_(FlightRecorder::from_config(group_.rank, group_.size, group_.name, group_.job)),
      chunk_bytes_(static_cast<size_t>(std::max<int64_t>(4096, config::get_int("KOLO_CHUNK_BYTES")))),
      wait_(WaitPolicy::from_config(ranks_on_my_host(group_))),
      inline_enabled_(config::get_int("KOLO_INLINE") != 0),
      inline_window_(std::max<int64_t>(0, config::get_int("KOLO_INLINE_WINDOW_US"))),
      // A group of one has no message to move: its collectives are local copies.
      direct_capable_(config::get_int("KOLO_DIRECT") != 0 && group_.size <= EngineComm::kMaxDirectRanks &&
                      (group_.size == 1 || ctx_->all_peers_move_now())),
      direct_bytes_(static_cast<size_t>(std::max<int64_t>(0, config::get_int("KOLO_DIRECT_BYTES")))),
      direct_spin_(std::max<int64_t>(0, config::get_int("KOLO_DIRECT_SPIN_US"))) {
  // Sized for a few operations at once before any runs: where the direct path takes nearly
  // everything, the first operation to go the engine's way may come long after warm-up, and a
  // warm group allocates nothing per operation (tests/engine/hot_path_alloc_test.cpp).
  queue_.reserve(64);
  inline_batch_.reserve(64);
  pending_.reserve(16);
  lanes_.resize(2 * static_cast<size_t>(ctx_->size()));
  busy_lanes_.reserve(lanes_.size());
  spare_reqs_.reserve(16);
  for (int i = 0; i < 4; ++i) spare_reqs_.push_back(std::make_unique<transport::Request>());
  // The transport the flight recorder names for a collective: the one to the next rank.
  if (group_.size > 1) next_rank_transport_ = ctx_->transport_name(group_.to_ctx((group_.rank + 1) % group_.size));
  thread_ = std::thread([this] {
    kernels::forbid_device_calls_on_this_thread();  // device operations: the engine only touches flags
    loop();
  });
}

Executor::~Executor() {
  {
    std::lock_guard<FutexLock> lk(mu_);
    queue_close();
  }
  wake_.bump_and_wake();
  if (thread_.joinable()) thread_.join();
  // The thread ran everything queued before the close; anything left (it cannot be, but a
  // task's reference to its own Work would otherwise keep it alive for ever) is let go.
  while (!queue_.empty()) {
    Task& t = queue_.pop_front();
    if (t.work) release(t);
  }
}

void Executor::queue_close() {
  if (!queue_.closing()) queue_.close(close_task_);
}

void Executor::submit(Task& t, WorkPtr work, std::unique_lock<FutexLock>& lk) {
  bool notify;
  {
    if (queue_.closing()) throw Error("kolo: " + where(t) + ": the group is shut down");
    t.work = std::move(work);
    queue_.push_back(t);  // numbers it (its ticket) and appends it
    if (t.work) WorkAccess::set_runner(*t.work, weak_from_this(), t.ticket);
    // No clock is read here: whether a deferred operation waited too long for its caller is the
    // engine thread's to judge (due()).
    t.deferred = inline_enabled_ && !t.overlap && t.type != Task::Type::close &&
                 predict_inline_.load(std::memory_order_relaxed);
    notify = !t.deferred || wake_for_deferred();
    if (t.type != Task::Type::close && t.fr == nullptr)  // a direct attempt that handed over has one
      t.fr = fr_->record(t.stamp.seq, algo::coll_name(t.args.kind), t.algorithm ? t.algorithm->name : "",
                         t.args.bytes(), t.args.root, /*stamp=*/!t.deferred);
  }
  lk.unlock();
  if (notify) {
    wake_.bump_and_wake();
    ctx_->wake_sleeper();
  }
}

void Executor::undefer_through(size_t k) {
  bool any = false;
  for (size_t i = 0; i <= k && i < queue_.size(); ++i) any |= std::exchange(queue_[i].deferred, false);
  if (!any) return;
  wake_.bump_and_wake();
  ctx_->wake_sleeper();
}

void Executor::nudge(Work& w) {
  std::lock_guard<FutexLock> lk(mu_);
  const size_t k = queue_.find(w);
  if (k != SIZE_MAX) undefer_through(k);
}

void Executor::request_abort(const std::string& reason) {
  user_aborted_.store(true);
  ctx_->peer_failed(group_.rank, transport::Failure::aborted, reason);
  {
    std::lock_guard<FutexLock> lk(mu_);
  }
  ctx_->wake();
  wake_.bump_and_wake();
}

void Executor::close_and_join() {
  {
    std::lock_guard<FutexLock> lk(mu_);
    queue_close();
  }
  wake_.bump_and_wake();
  ctx_->wake();
  if (thread_.joinable()) thread_.join();
  if (close_error_) std::rethrow_exception(std::exchange(close_error_, nullptr));
}

bool Executor::failed() const { return failed_.load(); }

void Executor::fail_group_from_context() {
  try {
    raise_failure("rank " + std::to_string(group_.rank) + " of " + std::to_string(group_.size) + " (group " +
                      group_.name + ")",
                  ctx_->failure());
  } catch (const Error& e) {
    group_error_ = std::current_exception();
    group_error_text_ = e.what();
    fail_group(e, group_);
  }
}

bool Executor::with_failed_connections(const std::function<void(Context&)>& fn,
                                       std::chrono::steady_clock::time_point until) {
  // The engine thread holds the run lock while it runs callbacks: waiting for it there never ends.
  if (std::this_thread::get_id() == thread_.get_id()) return false;
  std::unique_lock<AsymmetricLock> run(run_mu_, std::try_to_lock);
  while (!run.owns_lock()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    run.try_lock();
  }
  if (!ctx_->has_failure())
    ctx_->peer_failed(group_.rank, transport::Failure::aborted,
                      "kolo: rank " + std::to_string(group_.rank) + " of group " + group_.name + " aborted: re-forming it");
  if (!failed_) {
    // What the engine thread does when it finds the failure while idle (executor_thread.cpp).
    fail_group_from_context();
  }
  fn(*ctx_);
  return true;
}

std::string Executor::where(const Task& t) const {
  const GroupInfo& g = info(t);
  return describe_operation(t.args, t.stamp.seq) + " on rank " + std::to_string(g.rank) + " of " + std::to_string(g.size) +
         " (" + g.label() + ")";
}

std::exception_ptr Executor::not_run_error(const Task& t) const {
  // The culprit in the numbering of t's group (the first error may have come from another group
  // on these connections, which numbers its ranks its own way).
  const int peer = info(t).from_ctx_peer(culprit_);
  return std::make_exception_ptr(
      PeerError("kolo: " + where(t) + " was not run: the group failed earlier: " + group_error_text_, peer));
}

void Executor::fail_group(const std::exception& e, const GroupInfo& g) {
  int culprit;
  ErrorKind kind;
  classify(e, &culprit, &kind);
  // Peers decode the abort notice's culprit as the Context numbers them.
  culprit = culprit >= 0 && culprit < g.size ? g.to_ctx(culprit) : -1;
  fail_group(e.what(), culprit, kind);
}

void Executor::fail_group(const std::string& reason, int culprit, ErrorKind kind) {
  if (failed_.exchange(true)) return;
  culprit_ = culprit;
  KOLO_LOG(error, reason);
  fr_->dump(reason);
  ctx_->abort(encode_abort_reason(culprit, kind, reason));
  // The abort failed the requests of pending point-to-point operations; fail their works too.
  if (!pending_.empty()) error_delivered_ = true;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].task == nullptr) continue;
    Task& t = *end_pending(pending_[i]);
    fr_->finished(t.fr, false);
    WorkAccess::finish(*t.work, std::make_exception_ptr(PeerError("kolo: " + where(t) + " failed: " + reason,
                                                                  info(t).from_ctx_peer(culprit))));
    release(t);
  }
  trim_pending();
}

void Executor::run_task(Task& t) {
  if (failed_) {
    error_delivered_ = true;
    fr_->finished(t.fr, false);
    WorkAccess::finish(*t.work, not_run_error(t));
  } else if (t.gate && !pass_gate(t)) {
    // Failed, and so has the group: the peers learn it from the abort.
  } else if (t.type != Task::Type::collective) {
    post_point_to_point(t);  // pending now: released when it ends
    return;
  } else {
    run_collective(t);
  }
  const bool collective = t.type == Task::Type::collective;
  release(t);  // `t` may be gone from here on
  if (collective) queue_.collective_finished();
}

bool Executor::pass_gate(Task& t) {
  try {
    t.gate->gate(std::chrono::steady_clock::now() + t.timeout);
    return true;
  } catch (const std::exception& e) {
    const std::string msg = "kolo: " + where(t) + ": " + e.what();
    group_error_ = std::make_exception_ptr(TimeoutError(msg));
    group_error_text_ = msg;
    fr_->finished(t.fr, false);
    fail_group(msg, group_.rank, ErrorKind::timeout);
    error_delivered_ = true;
    WorkAccess::finish(*t.work, group_error_);
    return false;
  }
}

void Executor::run_collective(Task& t) {
  const GroupInfo& g = info(t);
  EngineComm comm(*ctx_, scratch_, coll_reqs_, coll_temp_, g, t.args, t.stamp, t.timeout, chunk_bytes_, wait_);
  comm.skip_sends(t.skip_sends);
  run_algorithm(t, *t.work, comm);
}

void Executor::run_algorithm(Task& t, Work& work, EngineComm& comm, bool unshared) {
  const GroupInfo& g = info(t);
  const char* transport = t.group == nullptr       ? next_rank_transport_
                          : g.size > 1 ? ctx_->transport_name(g.to_ctx((g.rank + 1) % g.size))
                                       : "self";
  // A direct run is recorded once it ends (ran() dates its start and end at once); one handed
  // over is started by the engine's run.
  if (!comm.direct()) fr_->started(t.fr, transport);
  if (t.fr) comm.set_waiting_slot(&t.fr->waiting_on);
  if (t.args.kind == algo::CollKind::recv) comm.set_p2p_recv_counters(recv_counters(info(t)));  // recv "any"
  KOLO_LOG(info, algo::coll_name(t.args.kind) << " #" << t.stamp.seq << ": algorithm " << t.algorithm->name << ", transport "
                                             << transport
                                             << ", " << t.args.bytes() << " bytes per rank");
  try {
    t.algorithm->run(comm);
  } catch (const Error& e) {
    // Abort while `comm` (which owns the requests the transports point at) is still alive.
    if (!group_error_) {
      group_error_ = std::current_exception();
      group_error_text_ = e.what();
    }
    fr_->finished(t.fr, false);
    fail_group(e, g);
    error_delivered_ = true;
    if (comm.source() >= 0) WorkAccess::set_source_rank(work, comm.source());
    WorkAccess::finish(work, std::current_exception());
    return;
  } catch (const std::exception& e) {
    std::string msg = "kolo: " + where(t) + ": internal error: " + e.what();
    group_error_ = std::make_exception_ptr(Error(msg));
    group_error_text_ = msg;
    fr_->finished(t.fr, false);
    fail_group(msg, -1, ErrorKind::peer);
    error_delivered_ = true;
    WorkAccess::finish(work, group_error_);
    return;
  }
  if (comm.direct())
    fr_->ran(t.fr, transport);  // done in a call of its caller: dated one time in 16
  else
    fr_->finished(t.fr, true);
  if (comm.source() >= 0) WorkAccess::set_source_rank(work, comm.source());
  if (unshared)
    WorkAccess::finish_unshared(work);
  else
    WorkAccess::finish(work, nullptr);
}

}  // namespace kolo::engine

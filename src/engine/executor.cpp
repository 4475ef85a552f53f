#include "engine/executor.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include "common/cpu_relax.hpp"
#include "common/log.hpp"
#include "common/config.hpp"
#include "engine/running_operations.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;
using transport::Request;

// The waiter's bound leaves the operation's own timeout time to end it (negative: no bound).
static bool within(std::chrono::milliseconds wait_timeout, std::chrono::milliseconds op_timeout) {
  return wait_timeout < std::chrono::milliseconds::zero() || wait_timeout >= op_timeout;
}

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
      fr_(FlightRecorder::from_config(group_.rank, group_.size, group_.name)),
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
  thread_ = std::thread([this] { loop(); });
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
    if (queue_.front()->work) release(*queue_.front());
    queue_.pop_front();
  }
}

void Executor::queue_close() {
  if (closing_) return;
  closing_ = true;
  close_task_.type = Task::Type::close;
  close_task_.ticket = next_ticket_++;
  queue_.push_back(&close_task_);
}

void Executor::submit(Task& t, WorkPtr work, std::unique_lock<FutexLock>& lk) {
  bool notify;
  {
    if (closing_) throw Error("kolo: " + where(t) + ": the group is shut down");
    t.work = std::move(work);
    t.ticket = next_ticket_++;
    if (t.work) WorkAccess::set_runner(*t.work, weak_from_this(), t.ticket);
    // No clock is read here: whether a deferred operation waited too long for its caller is the
    // engine thread's to judge (due()).
    t.deferred = inline_enabled_ && !t.overlap && t.type != Task::Type::close &&
                 predict_inline_.load(std::memory_order_relaxed);
    notify = !t.deferred || wake_for_deferred();
    if (t.type != Task::Type::close && t.fr == nullptr)  // a direct attempt that handed over has one
      t.fr = fr_->record(t.stamp.seq, algo::coll_name(t.args.kind), t.algorithm ? t.algorithm->name : "",
                         t.args.bytes(), t.args.root, /*stamp=*/!t.deferred);
    if (t.type == Task::Type::collective) ++collectives_queued_;
    queue_.push_back(&t);
    add_queued(1);
  }
  lk.unlock();
  if (notify) {
    wake_.bump_and_wake();
    ctx_->wake_sleeper();
  }
}

size_t Executor::find_queued(const Work& w) const {
  // Tasks leave the queue only from the front, so a task's index is its ticket's distance from
  // the front's: no search, however many operations are queued.
  if (queue_.empty()) return SIZE_MAX;
  const uint64_t front = queue_.front()->ticket, t = WorkAccess::ticket(w);
  if (t < front || t - front >= queue_.size()) return SIZE_MAX;
  const size_t k = static_cast<size_t>(t - front);
  return queue_[k]->work.get() == &w ? k : SIZE_MAX;
}

bool Executor::only_receives_queued(size_t from) const {
  // Bounded: a long queue is the engine's to work through anyway.
  constexpr size_t kLook = 16;
  if (queue_.size() > from + kLook) return false;
  for (size_t i = from; i < queue_.size(); ++i)
    if (queue_[i]->type != Task::Type::point_to_point || queue_[i]->args.kind != algo::CollKind::recv) return false;
  return true;
}

void Executor::undefer_through(size_t k) {
  bool any = false;
  for (size_t i = 0; i <= k && i < queue_.size(); ++i) any |= std::exchange(queue_[i]->deferred, false);
  if (!any) return;
  wake_.bump_and_wake();
  ctx_->wake_sleeper();
}

bool Executor::run_inline(Work& w, std::chrono::milliseconds wait_timeout) {
  // A caller waits for an operation that has not completed: callers are waiting again, so defer
  // the next collectives to them. (Setting this only when the inline run succeeds, as before,
  // never recovered once the engine thread had taken over: it takes every later operation
  // before its caller arrives, and the caller then finds nothing to run inline.)
  predict_inline_.store(true, std::memory_order_relaxed);
  bool only_receives_behind = false;  // w is a lone send/receive with only receives queued after it
  std::unique_lock<AsymmetricLock> run(run_mu_, std::defer_lock);
  if (inline_enabled_ && running_operations == 0) (void)run.try_lock();
  {
    std::unique_lock<FutexLock> lk(mu_);
    const size_t k = find_queued(w);
    if (k == SIZE_MAX) {
      // Running or done, or a send or receive already posted (by an earlier inline run): with
      // the engine thread idle, poll for it here rather than sleep until that thread does.
      lk.unlock();
      const Pending* p = run.owns_lock() ? find_pending(w) : nullptr;
      if (!p || !within(wait_timeout, p->task->timeout)) return false;
      RunningOperations mark;
      drive_point_to_point(w);
      return true;
    }
    // Only operations the caller may run (not the close), in issue order, and only if the
    // waiter does not want to be released before the operations' own timeouts could end them.
    bool ok = run.owns_lock();
    only_receives_behind = k == 0 && queue_[0]->type == Task::Type::point_to_point && only_receives_queued(1);
    for (size_t i = 0; ok && i <= k; ++i)
      ok = queue_[i]->type != Task::Type::close && within(wait_timeout, queue_[i]->timeout);
    if (!ok) {
      undefer_through(k);  // the waiter will sleep: the engine thread must run them now
      return false;
    }
    for (size_t i = 0; i <= k; ++i) {
      inline_batch_.push_back(queue_.front());
      queue_.pop_front();
    }
    add_queued(-static_cast<int>(k + 1));
  }
  RunningOperations mark;
  // `w` stays alive throughout: its caller holds a reference.
  if (inline_batch_.size() == 1 && pending_.empty() && run_waited_direct(*inline_batch_.front(), only_receives_behind)) {
    inline_batch_.clear();
    return true;
  }
  for (Task* t : inline_batch_) run_task(*t);
  inline_batch_.clear();  // keeps its capacity: the next inline run allocates nothing
  check_pending();
  // A send or receive is posted now; the caller polls until it completes.
  if (!WorkAccess::released(w)) {
    drive_point_to_point(w);
  } else if (!pending_.empty()) {
    // `w` completed, but sends or receives run before it are still in flight: the engine thread
    // must poll for them. Asleep with nothing queued it would not look (their callers may
    // already sleep on them, having found the run lock taken by this run).
    std::lock_guard<FutexLock> lk(mu_);
    wake_.bump_and_wake();
  }
  return true;
}

// The waiter's run of a posted send or receive: the polling the engine thread would do, on the
// waiting thread, which saves the hand-off to that thread and back (two wake-ups, and with
// ranks outnumbering cores two context switches). Later sends and receives are posted as they
// are issued, as the engine thread would post them: the peer may need one of them before it
// answers the operation waited for (two ranks that each wait for their send before their
// receive). A queued collective (or close) ends the run: the engine thread takes over, since
// that may take longer than the waiter's bound, and the waiter sleeps until its operation ends.
void Executor::drive_point_to_point(Work& w) {
  // As EngineComm::wait: pure polls first, the clock read only once polls find nothing (and
  // every kClockEvery polls while data moves, to bound the wait by the deadlines), then polls
  // that yield the core for KOLO_SPIN_US, then sleeps in Context::block.
  constexpr unsigned kClockEvery = 1024;
  Clock::time_point spin_until{};
  int idle_polls = 0;
  unsigned polls = 0;
  bool handed_over = false;
  while (!WorkAccess::released(w)) {
    const uint64_t key = ctx_->wake_key();  // before the look at the queue: see Context::block
    if (queued_.load(std::memory_order_seq_cst) > 0 && !post_queued_point_to_point()) {
      handed_over = true;
      break;
    }
    const bool moved = ctx_->poll();
    ++polls;
    if (moved || ctx_->has_failure()) {
      check_pending(polls % kClockEvery == 0 ? Clock::now() : Clock::time_point::min());
      continue;
    }
    if (++idle_polls <= wait_.pure_spin_polls) {
      cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    check_pending(now);  // deadlines
    if (WorkAccess::released(w)) break;
    if (spin_until == Clock::time_point{}) spin_until = now + wait_.spin;
    if (now < spin_until) std::this_thread::yield();
    else if (!ctx_->poll()) ctx_->block(std::chrono::microseconds(1000), key);  // an issue or abort ends it
  }
  // What is still in flight (a send the peer has not read yet) or queued is the engine thread's.
  if (handed_over || !pending_.empty()) {
    std::lock_guard<FutexLock> lk(mu_);
    if (!queue_.empty()) undefer_through(0);
    wake_.bump_and_wake();
  }
}

// Posts the sends and receives at the queue's front; false if a collective (or the close) is
// next, which the engine thread runs.
bool Executor::post_queued_point_to_point() {
  bool collective_next;
  {
    std::lock_guard<FutexLock> lk(mu_);
    while (!queue_.empty() && queue_.front()->type == Task::Type::point_to_point) {
      inline_batch_.push_back(queue_.front());
      queue_.pop_front();
      add_queued(-1);
    }
    collective_next = !queue_.empty();
  }
  for (Task* t : inline_batch_) run_task(*t);
  inline_batch_.clear();
  return !collective_next;
}

void Executor::nudge(Work& w) {
  std::lock_guard<FutexLock> lk(mu_);
  const size_t k = find_queued(w);
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

void Executor::wait_for_work() {
  // A training loop or benchmark issues the next operation within microseconds; polling the
  // queue briefly (yielding the core) saves a futex wake-up per operation.
  auto until = Clock::now() + wait_.spin;
  while (queued_.load(std::memory_order_acquire) == 0 && Clock::now() < until) {
    if (pending_n_.load(std::memory_order_acquire) > 0 || ctx_->has_failure()) return;
    std::this_thread::yield();
  }
}

// With run_mu_ held (through `run`): the next operation to run, or false when there is none
// but in-flight point-to-point operations or a failure need attention. Waits without run_mu_, so
// that a waiting caller can run a deferred operation itself meanwhile.
bool Executor::take_next(std::unique_lock<AsymmetricLock>& run, Task** out) {
  // Even with nothing to do, look at the transports now and then: a peer may fail while idle.
  constexpr auto kIdleCheck = std::chrono::milliseconds(10);
  // While callers are expected to run their operations (deferral on), an idle sleep lasts at
  // most one (stretched) window: a deferred operation wakes nobody when it is issued, and one
  // whose caller does not come (an isend before a long computation) must be found and taken
  // within two windows, not after the idle check's 10 ms.
  const auto idle_sleep = [&] {
    const auto w = std::chrono::duration_cast<std::chrono::microseconds>(kIdleCheck);
    const auto floor = std::chrono::microseconds(100);  // KOLO_INLINE_WINDOW_US=0: no busy loop
    return predict_inline_.load(std::memory_order_relaxed) ? std::clamp(engine_window(), floor, w) : w;
  };
  std::unique_lock<FutexLock> lk(mu_);
  for (;;) {
    const bool attention = !pending_.empty() || (ctx_->has_failure() && !failed_);
    Clock::time_point until;
    if (!queue_.empty()) {
      Task& f = *queue_.front();
      const auto now = f.deferred ? Clock::now() : Clock::time_point{};
      const bool young = f.deferred && now < due(f, now);
      if (!young) {
        // A deferred operation nobody came for: the caller overlaps; stop deferring, and take
        // what it queued behind it without waiting out a window for each.
        if (f.deferred) {
          predict_inline_.store(false, std::memory_order_relaxed);
          window_stretch_ = 1;
          for (size_t i = 1; i < queue_.size(); ++i) queue_[i]->deferred = false;
        }
        *out = &f;
        idle_timers_ = 0;  // working: the next idle spell starts with windows again
        queue_.pop_front();
        add_queued(-1);
        return true;
      }
      if (attention) return false;
      until = due(f, now);
    } else {
      if (attention) return false;
      until = Clock::now() + idle_sleep();
    }
    const uint32_t gen = wake_.read();
    uint64_t waited_ticket = queue_.empty() ? UINT64_MAX : queue_.front()->ticket;
    lk.unlock();
    run.unlock();
    // Sleep without run_mu_, and wake up without it too: when the timer goes off while a caller
    // runs the queue's front inline (the usual case: it arrived within the window), taking
    // run_mu_ here would block this thread on it and make the caller pay a futex wake-up at its
    // unlock. So look first, under mu_ only, whether anything is due.
    // Every timer that finds its operation gone (run inline by its caller) doubles the time the
    // engine gives the next ones, up to kMaxStretch windows: a thread woken every window costs a
    // context switch each time, which is most of a small collective's time when ranks outnumber
    // cores. An operation found overdue resets it (take_next above).
    for (;;) {
      wake_.sleep(gen, until);
      if (wake_.read() != gen) break;  // woken: look again from the top
      const auto now = Clock::now();
      if (now < until) continue;  // a spurious return
      std::lock_guard<FutexLock> w(mu_);
      if (ctx_->has_failure()) break;
      if (queue_.empty() || queue_.front()->ticket != waited_ticket) window_stretch_ = std::min(2 * window_stretch_, kMaxStretch);
      if (queue_.empty()) {
        // Sends or receives in flight need polling (whoever posted them should have woken this
        // thread; this bounds the cost should one not have).
        if (pending_n_.load(std::memory_order_acquire) > 0) break;
        if (window_stretch_ == kMaxStretch && ++idle_timers_ >= kDeepIdleAfter) {
          idle_deep_ = true;  // from now on a deferred operation wakes this thread (submit)
          until = now + kIdleCheck;
        } else {
          until = now + idle_sleep();
        }
        continue;
      }
      const Task& f = *queue_.front();
      if (!f.deferred || now >= due(f, now)) break;  // due: take it
      waited_ticket = f.ticket;
      until = due(f, now);  // a later operation, still left for its caller
    }
    run.lock();
    lk.lock();
    idle_deep_ = false;  // awake: a deferred operation is seen at the next look, as before
  }
}

Clock::time_point Executor::due(const Task& f, Clock::time_point now) {
  // A window from when this thread first saw the operation at the queue's front: callers read
  // no clock when they issue, and one that came later than that window would come later than
  // the window from its issue too.
  if (f.ticket != front_seen_ticket_) {
    front_seen_ticket_ = f.ticket;
    front_seen_at_ = now;
  }
  return front_seen_at_ + engine_window();
}

void Executor::run_task(Task& t) {
  if (failed_) {
    error_delivered_ = true;
    fr_->finished(t.fr, false);
    WorkAccess::finish(*t.work, not_run_error(t));
  } else if (t.type != Task::Type::collective) {
    post_point_to_point(t);  // pending now: released when it ends
    return;
  } else {
    run_collective(t);
  }
  const bool collective = t.type == Task::Type::collective;
  release(t);  // `t` may be gone from here on
  if (collective) collectives_done_.store(collectives_done_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void Executor::loop() {
  RunningOperations mark;
  std::unique_lock<AsymmetricLock> run(run_mu_);
  for (;;) {
    Task* next = nullptr;
    run.unlock();
    wait_for_work();
    run.lock();
    const uint64_t key = ctx_->wake_key();  // before take_next looks at the queue
    if (!take_next(run, &next)) {
      // Idle but point-to-point operations are in flight, or a failure needs handling.
      if (ctx_->has_failure() && !failed_) {
        // A peer failed while this rank was idle: the next operation reports it.
        try {
          raise_failure("rank " + std::to_string(group_.rank) + " of " + std::to_string(group_.size) + " (group " +
                            group_.name + ")",
                        ctx_->failure());
        } catch (const Error& e) {
          group_error_ = std::current_exception();
          group_error_text_ = e.what();
          fail_group(e, group_);
        }
        continue;
      }
      if (!ctx_->poll()) ctx_->block(std::chrono::microseconds(1000), key);
      check_pending();
      continue;
    }
    switch (next->type) {
      case Task::Type::collective:
      case Task::Type::point_to_point:
        run_task(*next);
        break;
      case Task::Type::close: {
        // Finish what is in flight, then say goodbye.
        while (!pending_.empty() && !failed_) {
          if (!ctx_->poll()) ctx_->block(std::chrono::microseconds(1000));
          check_pending();
        }
        if (!failed_ && ctx_->has_failure()) {
          try {
            raise_failure("shutdown of rank " + std::to_string(group_.rank) + " of " + std::to_string(group_.size) +
                              " (group " + group_.name + ")",
                          ctx_->failure());
          } catch (const Error& e) {
            group_error_ = std::current_exception();
            group_error_text_ = e.what();
            fail_group(e, group_);
          }
        }
        // A failure no operation reported (a peer aborted after this rank's last operation, say
        // a broadcast root whose receivers saw a mismatch) is reported by shutdown() instead;
        // the user's own abort() is not.
        if (failed_ && !error_delivered_ && !user_aborted_.load()) close_error_ = group_error_;
        if (!failed_) {
          auto missing = ctx_->close(Clock::now() + close_timeout_);
          if (ctx_->has_failure()) {
            // A peer aborted after this rank's last operation finished (e.g. it was the root of
            // a broadcast that another rank could not match): report it from shutdown().
            try {
              raise_failure("shutdown of rank " + std::to_string(group_.rank) + " of " + std::to_string(group_.size) +
                                " (group " + group_.name + ")",
                            ctx_->failure());
            } catch (const Error&) {
              close_error_ = std::current_exception();
            }
          }
          if (!missing.empty()) {
            std::string list;
            for (int p : missing) list += (list.empty() ? "" : ", ") + std::to_string(p);
            KOLO_LOG(warn, "group " << group_.name << ": rank(s) " << list << " did not say goodbye within the timeout");
          }
        }
        return;
      }
    }
    check_pending();
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

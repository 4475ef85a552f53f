// The executor's direct path (docs/ARCHITECTURE.md, step 3 of "One all-reduce"): a small
// collective, send or receive run in the call that issues it while the group is idle, and its
// hand-over to the engine when a message it needs is late; run_waited_direct tries it again for
// the waiter. The queue and the one way an operation runs are in executor.cpp, the waiter in
// executor_waiter.cpp, the engine thread in executor_thread.cpp, the posted sends and receives
// in executor_pending.cpp.
#include "engine/executor.hpp"
#include "engine/running_operations.hpp"

namespace kolo::engine {

bool Executor::run_direct(Task& t, const std::shared_ptr<Operation>& work, std::unique_lock<FutexLock>& lk) {
  // Issue order holds only if everything issued before has completed and nothing is queued (a
  // send or receive posted earlier is fine: the pairs keep each direction's order). Not from a
  // completion callback of an operation this thread runs, not for a sharing subgroup (its
  // parent's operations interleave), not when the caller asked for the engine thread.
  // A send may also pass receives still queued (they send nothing it could overtake on its
  // pair), as the sends of a sendrecv loop issued back to back must: each peer waits for them.
  const bool p2p = t.type == Task::Type::point_to_point;
  const bool send_past_receives = p2p && t.args.kind == algo::CollKind::send && queue_.only_receives_from(0);
  if (!direct_capable_ || t.args.bytes() > direct_bytes_ || t.group || t.overlap || queue_.closing() ||
      !(queue_.empty() || send_past_receives) || !(collectives_done(lk) || send_past_receives) ||
      running_operations != 0 || failed_.load(std::memory_order_relaxed))
    return false;
  if (!p2p && (t.type != Task::Type::collective || t.algorithm == nullptr ||
               t.algorithm->direct_max_ranks < group_.size))
    return false;
  std::unique_lock<AsymmetricLock> run(run_mu_, std::try_to_lock);  // try: mu_ is held (lock order)
  if (!run.owns_lock() || ctx_->has_failure()) return false;
  if (p2p) return run_point_to_point_direct(t, *work, /*unshared=*/true);  // not returned yet
  // Ours from here: numbered and counted like a queued collective, so that whoever issues
  // meanwhile queues behind it; the queue lock is let go for the run (a completion callback
  // this thread runs may issue).
  queue_.number(t);
  t.fr = fr_->record(t.stamp.seq, WorkAccess::name(*work), t.algorithm->name, t.args.bytes(), t.args.root,
                     /*stamp=*/false);
  lk.unlock();
  bool ran;
  {
    RunningOperations mark;
    ran = attempt_direct(t, *work, /*unshared=*/true);  // not returned to its caller yet
  }
  if (ran) {
    queue_.collective_finished();
    return true;
  }
  // Handed over: back to the queue's front, before whatever was issued meanwhile (nothing left
  // the queue: taking from it needs the run lock, still ours), as submit() would have queued it.
  bool notify;
  lk.lock();
  t.work = work;
  WorkAccess::set_runner(*t.work, weak_from_this(), t.ticket);
  t.deferred = inline_enabled_ && predict_inline_.load(std::memory_order_relaxed);
  notify = !t.deferred || wake_for_deferred();
  queue_.push_front(t);
  lk.unlock();
  run.unlock();
  if (notify) {
    wake_.bump_and_wake();
    ctx_->wake_sleeper();
  }
  return true;
}

bool Executor::run_point_to_point_direct(Task& t, Work& work, bool unshared) {
  // Once, without waiting: a receive issued before its message was sent (pre-posted, as a
  // pipeline does) must not hold its caller, nor a send meet a full ring.
  const GroupInfo& g = group_;
  const int peer = g.to_ctx(t.args.root);
  transport::Pair& pair = ctx_->pair(peer);
  const size_t bytes = t.args.bytes();
  if (t.args.kind == algo::CollKind::send) {
    if (pair.send_now(t.args.send, bytes, encode(t.stamp)) != transport::Pair::Now::sent) return false;
  } else {
    // Its number on the pair is the next receive's (post_point_to_point), taken only if it
    // completes here.
    uint64_t& next = recv_counters(g)[t.args.root];
    t.stamp.seq = next;
    if (!pair.recv_now(t.args.recv, bytes, encode(t.stamp))) return false;
    ++next;
  }
  if (t.fr == nullptr)  // issued just now, both locks held: recorded after the fact, in issue order
    fr_->record_ran(t.stamp.seq, algo::coll_name(t.args.kind), "", bytes, t.args.root, ctx_->transport_name(peer));
  else  // a queued one (run_waited_direct) has its record already
    fr_->ran(t.fr, ctx_->transport_name(peer));
  if (unshared)
    WorkAccess::finish_unshared(work);
  else
    WorkAccess::finish(work, nullptr);
  return true;
}

bool Executor::attempt_direct(Task& t, Work& work, bool unshared) {
  EngineComm comm(*ctx_, scratch_, coll_reqs_, coll_temp_, group_, t.args, t.stamp, t.timeout, chunk_bytes_, wait_);
  comm.skip_sends(t.skip_sends);
  comm.go_direct(direct_spin_);
  try {
    run_algorithm(t, work, comm, unshared);
  } catch (const DirectHandoff&) {
    t.skip_sends = comm.sends_done();
    return false;
  }
  return true;
}

bool Executor::run_waited_direct(Task& t, bool only_receives_behind) {
  // With the run lock held, `t` off the queue's front and nothing posted (pending_ empty): the
  // group is as idle as run_direct requires. The caller is about to wait anyway, so a message
  // still late costs it nothing but the polls; the usual run follows.
  if (!direct_capable_ || t.group || t.overlap || t.args.bytes() > direct_bytes_ ||
      failed_.load(std::memory_order_relaxed) || ctx_->has_failure())
    return false;
  if (t.type == Task::Type::point_to_point) {
    // Only with nothing but receives queued behind it: drive_point_to_point posts the sends
    // issued after it while it waits, and a peer may need one of them before it sends what this
    // one waits for (a ring of sends and receives issued back to back).
    if (!only_receives_behind) return false;
    DirectSpin spin(*ctx_, direct_spin_, wait_.pure_spin_polls > 0);
    do {
      if (run_point_to_point_direct(t, *t.work, /*unshared=*/false)) {
        release(t);  // `t` may be gone from here on
        return true;
      }
    } while (spin.again());
    return false;
  }
  // Not where ranks outnumber cores (WaitPolicy yields at once): there a message late at issue is
  // usually still late, the failed attempt costs the window again, and an algorithm of several
  // rounds lost 2-5x (4 ranks here, gather and scatter of 8 KiB per rank: docs/PERFORMANCE.md).
  if (t.type != Task::Type::collective || t.algorithm == nullptr || t.algorithm->direct_max_ranks < group_.size ||
      wait_.pure_spin_polls == 0 || !attempt_direct(t, *t.work, /*unshared=*/false))
    return false;
  release(t);
  queue_.collective_finished();
  return true;
}

}  // namespace kolo::engine

// A group's executor: its operations, in issue order, and who runs them. It knows no collective:
// a collective is its algorithm (algorithms/algorithm.hpp) run to completion on an EngineComm;
// a send or receive is posted on its pair and completes in the background, so a send and a
// receive issued by two ranks towards each other never deadlock. The first failure aborts the
// group: peers are told, every later operation fails fast.
//
// One way to run an operation (run_task, executor.cpp), three threads that may call it, and the
// queue between them. Only one thread at a time runs operations and touches the transports
// (run_mu_); issuing takes only the queue lock (mu_).
//   the caller at issue  executor_direct.cpp   a small collective, send or receive issued while
//                                              the group is idle runs in the issuing call
//                                              (KOLO_DIRECT); a message late beyond
//                                              KOLO_DIRECT_SPIN_US hands it to the queue's front
//   its waiter           executor_waiter.cpp   a caller that waits for a queued operation runs
//                                              it, and what precedes it, itself (run_inline)
//   the engine thread    executor_thread.cpp   what callers leave to it: operations issued with
//                                              Options.overlap, deferred ones nobody came for
//                                              within KOLO_INLINE_WINDOW_US, posted sends and
//                                              receives to poll, the close
// While callers keep waiting right after they issue, a queued collective is "deferred": the
// engine thread is not woken, and the caller's wait() runs it; if nobody comes within the
// window (the caller wanted overlap), the engine thread takes it and stops deferring.
#pragma once
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "algorithms/algorithm.hpp"
#include "common/asymmetric_lock.hpp"
#include "common/futex_lock.hpp"
#include "common/ring_queue.hpp"
#include "engine/context.hpp"
#include "engine/engine_comm.hpp"
#include "engine/flight_recorder.hpp"
#include "engine/scratch.hpp"
#include "engine/tags.hpp"
#include "engine/operation_queue.hpp"
#include "engine/task.hpp"
#include "engine/work_access.hpp"
#include "kolo/work.hpp"

namespace kolo::engine {

class Executor final : public WorkRunner, public std::enable_shared_from_this<Executor> {
 public:
  Executor(std::unique_ptr<Context> ctx, GroupInfo group, std::chrono::milliseconds close_timeout);
  ~Executor() override;  // stops the thread; the caller shut down or aborted first

  // Issuing is one step under the queue lock, the only lock an issue takes: the caller stamps
  // its operation (sequence numbers, which its group counts under this lock too) and queues it
  // while holding it, so the queue is in stamp order when several threads issue.
  std::unique_lock<FutexLock> lock_queue() { return std::unique_lock<FutexLock>(mu_); }
  // With lock_queue()'s lock: queues the task (moved once), then unlocks and wakes the engine
  // thread unless the task is left for its caller. The executor must be owned by a shared_ptr
  // (Works refer to it weakly).
  // `t` lives in `work` (an Operation); the queue holds &t and `work` is the engine's reference.
  void submit(Task& t, WorkPtr work, std::unique_lock<FutexLock>& lk);
  // With that lock: every collective queued so far has completed (its callbacks have run).
  // Collectives run one at a time in queue order, so two counters say it.
  bool collectives_done(const std::unique_lock<FutexLock>&) const { return queue_.collectives_done(); }
  // The direct path (KOLO_DIRECT), with lock_queue()'s lock: when nothing of the group is queued
  // or running, a small collective whose algorithm allows it runs here, on the issuing thread,
  // under the run lock: its sends go straight into the pairs and it takes its messages as they
  // arrive, with no queue, no engine requests and no thread hand-off (EngineComm::go_direct).
  // It counts as queued meanwhile (the queue lock is let go: an operation issued meanwhile by
  // another thread queues behind it). If a message it needs does not arrive within
  // KOLO_DIRECT_SPIN_US it goes to the queue's front for the engine, which skips the sends
  // already made (t.skip_sends). True when it ran or was queued that way (`lk` unlocked);
  // false, with nothing done, when the caller must submit() it. A send or receive is tried once,
  // with both locks held: done at once, or submitted as usual. `work` is taken as the
  // Operation's own pointer: a WorkPtr parameter made the caller build a temporary (an atomic
  // increment) and drop it after the run (an atomic decrement, which waited for the message
  // just published to leave this core: docs/PERFORMANCE.md).
  bool run_direct(Task& t, const std::shared_ptr<Operation>& work, std::unique_lock<FutexLock>& lk);
  // Requests an abort from any thread: the running operation fails with `reason`.
  void request_abort(const std::string& reason);
  // Queues an orderly close after everything already queued and waits for the thread to end.
  // Throws if a peer turned out to have failed or aborted during the goodbye.
  void close_and_join();
  bool failed() const;
  // For re-forming the group (ProcessGroup::shrink handing its connections over): runs `fn` on
  // the group's connections with the run lock held, so that no thread of this group touches them
  // meanwhile (the engine thread of a failed group only sleeps and polls under that lock). First
  // fails the group, aborting its connections, if no thread has yet turned the failure its
  // Context recorded (request_abort) into the group's. False, without running `fn`, when the
  // run lock is not to be had by `until`: the caller is the engine thread (a completion callback
  // that shrinks, run while the group fails) or holds the lock itself (a callback the direct
  // path runs); the caller then connects anew.
  bool with_failed_connections(const std::function<void(Context&)>& fn, std::chrono::steady_clock::time_point until);
  // For ProcessGroup::shrink (any thread): the Context's first failure, and the culprit the
  // group's failure named (as the Context numbers its peers; -1 before it failed or if none).
  PeerFailure context_failure() const { return ctx_->failure(); }
  bool context_failed() const { return ctx_->has_failure(); }
  int failure_culprit() const { return failed_.load() ? culprit_.load() : -1; }
  // A subgroup that runs on this executor's connections: its id and name, for mismatch messages.
  void name_group(uint16_t id, const std::string& name) { ctx_->name_group(id, name); }
  const GroupInfo& group() const { return group_; }

  // WorkRunner: a waiting (or polling) user thread.
  bool run_inline(Work& w, std::chrono::milliseconds wait_timeout) override;
  void nudge(Work& w) override;

 private:
  // A posted point-to-point operation. Nothing in it is allocated per operation once warm: the
  // task (its Work, stamp, timeout) moves in, the request comes from spare_reqs_, and the text
  // naming the operation is made only if it fails.
  struct Pending {
    Task* task = nullptr;  // stamp.seq: the pair's point-to-point sequence number (blame chain); null once ended
    std::unique_ptr<transport::Request> req;  // a stable address: the transport holds it
    std::chrono::steady_clock::time_point deadline;
    uint64_t ticket = 0;  // the task's: entries are posted in ticket order (find_pending)
    uint32_t lane = 0;    // 2 * ctx peer + is_send
    uint64_t prev = kNoEntry, next = kNoEntry;  // the lane's live entries, oldest first
  };
  static constexpr uint64_t kNoEntry = UINT64_MAX;
  struct Lane {
    uint64_t head = kNoEntry, tail = kNoEntry;
    bool busy = false;  // listed in busy_lanes_
  };
  // Ends a live entry (its Work is the caller's to finish): the request goes back to the spares
  // and the entry stays, emptied, until every entry before it has ended too (trim_pending).
  Task* end_pending(Pending& p);
  void complete_pending(Pending& p);  // ended with success: its Work finished, the engine's reference dropped
  void trim_pending();
  Pending& pending_at(uint64_t no) { return pending_[static_cast<size_t>(no - pending_front_no_)]; }
  void date_pending(std::chrono::steady_clock::time_point now);
  // Every live entry in posting order: deadlines, failures, and done ones a lane has not shown.
  void scan_pending(std::chrono::steady_clock::time_point now, bool clock_read);
  // The operation has ended (its Work finished): drops the engine's reference, which may free
  // the Work and the task in it.
  static void release(Task& t) { WorkPtr last = std::move(t.work); }
  const GroupInfo& info(const Task& t) const { return t.group ? *t.group : group_; }
  const GroupInfo& info(const Pending& p) const { return info(*p.task); }
  // The group's counters of point-to-point receives per peer, numbered when posted.
  static uint64_t* recv_counters(const GroupInfo& g);

  void loop();
  void wait_for_work();
  bool take_next(std::unique_lock<AsymmetricLock>& run, Task** out);
  void run_task(Task& t);  // and release(t), unless it became a pending send or receive
  void undefer_through(size_t k);           // mu_ held
  void sync_pending_count() { pending_n_.store(pending_live_, std::memory_order_release); }
  void run_collective(Task& t);
  // run_direct for a send or receive: completes `work` if the message goes out, or has arrived
  // with the right number and size, at once; false (nothing done) otherwise. `unshared` as for
  // attempt_direct.
  bool run_point_to_point_direct(Task& t, Work& work, bool unshared);
  // The direct run of a numbered, recorded collective `t` (run lock held, group idle): true
  // when it completed `work`; false when it must be handed over (t.skip_sends: what went out,
  // an earlier attempt's included). `unshared`: `work` has not left its issuing call (no other
  // thread can wait on it or have asked for a callback), so it is finished by a plain store
  // (WorkAccess::finish_unshared); a handed-over one was returned to its caller.
  bool attempt_direct(Task& t, Work& work, bool unshared);
  // run_inline for a lone queued operation that its caller now waits for, while nothing else is
  // in flight: the direct path once more (a collective handed over by its issuing call, whose
  // late message is usually there by now; a send or receive retried for up to
  // KOLO_DIRECT_SPIN_US, as a sendrecv's message is on its way, if `only_receives_behind` it
  // in the queue). True when `t` completed (released); false when it must run as usual
  // (t.skip_sends says what went out).
  bool run_waited_direct(Task& t, bool only_receives_behind);
  // The algorithm of `t` on `comm`, finishing `work` with its outcome; a failure fails the group.
  // `unshared` as for attempt_direct.
  void run_algorithm(Task& t, Work& work, EngineComm& comm, bool unshared = false);
  void post_point_to_point(Task& t);
  // A device operation's gate (its inputs out of device memory), within its timeout; false when
  // it failed: the task is finished with the error and the group failed.
  bool pass_gate(Task& t);
  void check_pending();  // reads the clock when something is pending
  // Finishes the completed and failed ones, and those whose deadline is before `now`.
  void check_pending(std::chrono::steady_clock::time_point now);
  const Pending* find_pending(const Work& w) const;  // run_mu_ held
  void drive_point_to_point(Work& w);                 // run_mu_ held
  bool post_queued_point_to_point();                  // run_mu_ held
  void fail_group(const std::string& reason, int culprit, ErrorKind kind);
  void fail_group(const std::exception& e, const GroupInfo& g);  // e names ranks of g
  // The context's failure, found with no operation running (the engine thread idle, or a
  // re-forming group), becomes the group's error: the next operation reports it. Run lock held.
  void fail_group_from_context();
  std::exception_ptr not_run_error(const Task& t) const;
  std::string where(const Task& t) const;

  std::unique_ptr<Context> ctx_;
  GroupInfo group_;
  std::chrono::milliseconds close_timeout_;
  Scratch scratch_;
  RequestArena coll_reqs_;           // the running collective's requests (run_mu_)
  BumpArena coll_temp_;              // its algorithm's bookkeeping (Comm::temp; run_mu_)
  std::vector<Task*> inline_batch_;   // what run_inline() took from the queue (run_mu_)
  std::unique_ptr<FlightRecorder> fr_;  // the last KOLO_FR_SIZE operations, dumped on failure
  size_t chunk_bytes_;
  WaitPolicy wait_;  // how its collectives wait for messages
  bool inline_enabled_;
  std::chrono::microseconds inline_window_;
  // The direct path: KOLO_DIRECT and every peer (if any) reached by a transport that moves
  // messages at once; collectives up to direct_bytes_ per rank; how long one polls before it hands over.
  bool direct_capable_;
  size_t direct_bytes_;
  std::chrono::microseconds direct_spin_;
  const char* next_rank_transport_ = "self";  // the group's own collectives name it (run_algorithm)
  // How long the engine thread leaves a deferred operation to its caller: the window, stretched
  // while callers keep taking their operations in time (engine thread only; take_next).
  static constexpr unsigned kMaxStretch = 64;
  unsigned window_stretch_ = 1;
  std::chrono::microseconds engine_window() const { return inline_window_ * window_stretch_; }
  // When the engine thread takes the deferred operation `f` at the queue's front (under mu_).
  std::chrono::steady_clock::time_point due(const Task& f, std::chrono::steady_clock::time_point now);
  uint64_t front_seen_ticket_ = UINT64_MAX;
  std::chrono::steady_clock::time_point front_seen_at_;
  std::atomic<bool> predict_inline_{true};  // callers have been waiting right after issuing
  // Long idle (under mu_): the engine thread found the queue empty at kDeepIdleAfter stretched
  // windows since it last took an operation itself, and sleeps the idle check's 10 ms instead of
  // a window (3.2 ms), so an idle group wakes it ~100 times a second, not ~310; meanwhile whoever
  // queues a deferred operation wakes it, which a deferred operation otherwise does not (submit,
  // run_direct's hand-over). Operations their callers ran (the direct path, a waiter running a
  // deferred one) do not end the idle spell: the engine thread did nothing for them.
  static constexpr unsigned kDeepIdleAfter = 4;
  unsigned idle_timers_ = 0;  // empty timers since the engine thread last took an operation
  bool idle_deep_ = false;
  // Under mu_, queuing a deferred task: whether that must wake the engine thread (it sleeps long).
  bool wake_for_deferred() { return std::exchange(idle_deep_, false); }

  // Held by whichever thread runs operations or polls the transports. Given back by a plain store
  // (asymmetric_lock.hpp): the direct path gives it back right after its last send.
  AsymmetricLock run_mu_;
  FutexLock mu_;      // the queue; taken after run_mu_ when both are needed
  // Bumped (after a change under mu_) whenever the engine thread must look again; it sleeps on it.
  WakeWord wake_;
  OperationQueue queue_;  // under mu_
  Task close_task_;  // queued once, by whichever of close_and_join() and the destructor is first
  void queue_close();  // mu_ held

  // Point-to-point receives posted per peer (run_mu_): the sequence number the next one's tag
  // carries, which must count the sender's messages on that pair. Counted here, when posted,
  // not at issue: a receive from any source takes its number from the pair it chooses when it
  // runs, after later receives may have been issued.
  // Posted sends and receives (all under run_mu_), in posting order: entry number k is
  // pending_[k - pending_front_no_]. An ended entry keeps its place, emptied, until those before
  // it have ended, so that numbers stay put; pending_ is empty exactly when nothing is live.
  // A pair completes each direction's requests in posting order, so one lane per peer and
  // direction links its live entries, and check_pending looks at the lanes' fronts only:
  // its cost is the number of busy lanes and of ended entries, not of entries in flight (it
  // scanned them all, and erased from the front of a vector, on every poll that moved data:
  // 20,000 sends and receives issued before one wait took 266 us per exchange, 2.2 after;
  // docs/PERFORMANCE.md).
  RingQueue<Pending> pending_;
  uint64_t pending_front_no_ = 0;  // the number of pending_.front()
  size_t pending_live_ = 0;
  std::vector<Lane> lanes_;           // [2 * ctx peer + is_send], sized with the executor
  std::vector<uint32_t> busy_lanes_;  // lanes with live entries (and some just emptied)
  uint64_t undated_no_ = 0;  // entries from this number on have no deadline yet
  // No live entry's deadline is earlier (a bound: the entry that set it may have ended since).
  std::chrono::steady_clock::time_point earliest_deadline_ = std::chrono::steady_clock::time_point::max();
  std::vector<std::unique_ptr<transport::Request>> spare_reqs_;  // under run_mu_
  std::atomic<size_t> pending_n_{0};  // pending_live_, readable without run_mu_
  std::exception_ptr group_error_;
  std::string group_error_text_;
  std::atomic<int> culprit_{-1};  // the first failure's culprit, as the Context numbers its peers
  std::atomic<bool> failed_{false};
  std::exception_ptr close_error_;
  bool error_delivered_ = false;          // some Work has carried the group's error to the user
  std::atomic<bool> user_aborted_{false};
  std::thread thread_;
};

}  // namespace kolo::engine

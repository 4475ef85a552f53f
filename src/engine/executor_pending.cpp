// The executor's posted sends and receives (docs/ARCHITECTURE.md, "The hot path"): posting them,
// finding the ones that ended (one lane per peer and direction, since a pair completes each
// direction in posting order), their deadlines and failures. The rest of the executor is in
// executor.cpp (the queue, the one way an operation runs), executor_direct.cpp (the caller at
// issue), executor_waiter.cpp (its waiter) and executor_thread.cpp (the engine thread).
#include <algorithm>

#include "engine/executor.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;
using transport::Request;

const Executor::Pending* Executor::find_pending(const Work& w) const {
  // Entries are in ticket order: a binary search, however many are in flight.
  const uint64_t ticket = WorkAccess::ticket(w);
  size_t lo = 0, hi = pending_.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (pending_[mid].ticket < ticket) lo = mid + 1;
    else hi = mid;
  }
  if (lo == pending_.size()) return nullptr;
  const Pending& p = pending_[lo];
  return p.ticket == ticket && p.task != nullptr && p.task->work.get() == &w ? &p : nullptr;
}

void Executor::post_point_to_point(Task& t) {
  const GroupInfo& g = info(t);
  if (t.args.kind == algo::CollKind::recv) t.stamp.seq = recv_counters(g)[t.args.root]++;
  const int peer = g.to_ctx(t.args.root);
  fr_->started(t.fr, ctx_->transport_name(peer));
  std::unique_ptr<Request> req;
  if (spare_reqs_.empty()) {
    req = std::make_unique<Request>();
  } else {
    req = std::move(spare_reqs_.back());
    spare_reqs_.pop_back();
  }
  Request* r = req.get();
  const transport::Tag tag = encode(t.stamp);
  const size_t bytes = t.args.bytes();
  const bool send = t.args.kind == algo::CollKind::send;
  void* buf = t.args.recv;
  const void* data = t.args.send;
  // Queued before it is posted: a post may complete at once, and check_pending must find it.
  // No deadline yet: the first look at the clock while it is pending sets it (date_pending).
  const uint64_t no = pending_front_no_ + pending_.size();
  pending_.push_back(Pending{&t, std::move(req), Clock::time_point{}, t.ticket});
  ++pending_live_;
  sync_pending_count();
  Pending& p = pending_at(no);
  p.lane = 2 * static_cast<uint32_t>(peer) + (send ? 1 : 0);
  Lane& lane = lanes_[p.lane];
  p.prev = lane.tail;
  if (lane.tail != kNoEntry) pending_at(lane.tail).next = no;
  else lane.head = no;
  lane.tail = no;
  if (!lane.busy) {
    lane.busy = true;
    busy_lanes_.push_back(p.lane);
  }
  if (send) ctx_->pair(peer).post_send(data, bytes, tag, r);
  else ctx_->pair(peer).post_recv(buf, bytes, tag, r);
}

uint64_t* Executor::recv_counters(const GroupInfo& g) {
  // Sized at the group's first receive (the one allocation), then only counted.
  if (g.p2p_recv_seq.size() != static_cast<size_t>(g.size)) g.p2p_recv_seq.assign(static_cast<size_t>(g.size), 0);
  return g.p2p_recv_seq.data();
}

Task* Executor::end_pending(Pending& p) {
  // Out of its lane (almost always the lane's head: a pair completes in order).
  Lane& lane = lanes_[p.lane];
  if (p.prev != kNoEntry) pending_at(p.prev).next = p.next;
  else lane.head = p.next;
  if (p.next != kNoEntry) pending_at(p.next).prev = p.prev;
  else lane.tail = p.prev;
  Task* t = p.task;
  spare_reqs_.push_back(std::move(p.req));
  p.task = nullptr;
  --pending_live_;
  sync_pending_count();
  return t;
}

void Executor::complete_pending(Pending& p) {
  Task& t = *end_pending(p);
  fr_->finished(t.fr, true);
  WorkAccess::finish(*t.work, nullptr);
  release(t);
}

void Executor::trim_pending() {
  if (pending_live_ == 0) {
    // Nothing in flight: start afresh (the lanes are empty already; their busy marks go).
    pending_front_no_ += pending_.size();
    pending_.clear();
    for (uint32_t lane : busy_lanes_) lanes_[lane] = Lane{};
    busy_lanes_.clear();
    undated_no_ = pending_front_no_;
    earliest_deadline_ = Clock::time_point::max();
    return;
  }
  while (pending_.front().task == nullptr) {
    pending_.pop_front();
    ++pending_front_no_;
  }
}

void Executor::date_pending(Clock::time_point now) {
  // Each entry's timeout counts from the first clock read while it was pending (a send or
  // receive that completes at once costs no clock read); entries are dated once, in order.
  const uint64_t end = pending_front_no_ + pending_.size();
  for (uint64_t no = std::max(undated_no_, pending_front_no_); no < end; ++no) {
    Pending& p = pending_[static_cast<size_t>(no - pending_front_no_)];
    if (p.task == nullptr) continue;
    p.deadline = now + p.task->timeout;
    earliest_deadline_ = std::min(earliest_deadline_, p.deadline);
  }
  undated_no_ = end;
}

void Executor::check_pending() {
  if (pending_.empty()) return;  // the usual case after a collective: no clock read
  check_pending(Clock::now());
}

void Executor::check_pending(Clock::time_point now) {
  if (pending_.empty()) return;
  const bool clock_read = now != Clock::time_point::min();
  if (clock_read) date_pending(now);
  if (ctx_->has_failure() || (clock_read && now >= earliest_deadline_)) {
    scan_pending(now, clock_read);
    return;
  }
  for (size_t b = 0; b < busy_lanes_.size();) {
    Lane& lane = lanes_[busy_lanes_[b]];
    while (lane.head != kNoEntry) {
      Pending& p = pending_at(lane.head);
      const auto state = p.req->state;
      if (state == Request::State::pending) break;
      if (state != Request::State::done) {
        scan_pending(now, clock_read);  // failed: the scan reports it, in posting order
        return;
      }
      complete_pending(p);  // the lane's head moves on
    }
    if (lane.head == kNoEntry) {
      lane.busy = false;
      busy_lanes_[b] = busy_lanes_.back();
      busy_lanes_.pop_back();
    } else {
      ++b;
    }
  }
  trim_pending();
}

void Executor::scan_pending(Clock::time_point now, bool clock_read) {
  auto earliest = Clock::time_point::max();
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    if (p.task == nullptr) continue;
    Request& r = *p.req;
    if (r.state == Request::State::done) {
      complete_pending(p);
      continue;
    }
    const bool dated = p.deadline != Clock::time_point{};
    const bool overdue = clock_read && dated && now >= p.deadline;
    if (r.state == Request::State::failed || overdue || ctx_->has_failure()) {
      std::exception_ptr err;
      try {
        const GroupInfo& g = info(p);
        const std::string at = where(*p.task);
        if (r.state == Request::State::pending && !ctx_->has_failure())
          raise_timeout(at, p.task->timeout, r, false, p.task->stamp.seq, g);
        if (r.state == Request::State::pending) raise_failure(at, as_seen_by(g, ctx_->failure()));
        raise_request_failure(at, r, *ctx_, g);
      } catch (const Error& e) {
        err = std::current_exception();
        if (!group_error_) {
          group_error_ = err;
          group_error_text_ = e.what();
        }
        // Ended before the group fails: fail_group() finishes every other pending Work with the
        // group's error, and this one carries its own.
        Task& failing = *end_pending(p);
        fr_->finished(failing.fr, false);
        fail_group(e, info(failing));
        error_delivered_ = true;
        WorkAccess::finish(*failing.work, err);
        release(failing);
        trim_pending();
        return;
      }
    }
    if (dated) earliest = std::min(earliest, p.deadline);
  }
  earliest_deadline_ = earliest;
  trim_pending();
}

}  // namespace kolo::engine

#include "engine/engine_comm.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/config.hpp"
#include "common/cpu_relax.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

using transport::Failure;
using transport::Request;
using Clock = std::chrono::steady_clock;

EngineComm::EngineComm(Context& ctx, Scratch& scratch, RequestArena& reqs, BumpArena& temp, const GroupInfo& group,
                       const algo::CollArgs& args, const Stamp& stamp, std::chrono::milliseconds timeout,
                       size_t chunk_bytes, const WaitPolicy& wait)
    : ctx_(ctx),
      scratch_(scratch),
      group_(group),
      args_(args),
      stamp_(stamp),
      tag_(encode(stamp)),
      timeout_(timeout),
      chunk_bytes_(chunk_bytes),
      wait_(wait),
      reqs_(reqs),
      temp_(temp),
      waits_{true, stamp.seq, -1} {
  reqs_.reset();  // the last collective's requests are done, or were failed by its abort
  temp_.reset();
}

WaitPolicy WaitPolicy::from_config(int ranks_on_host) {
  WaitPolicy w;
  w.spin = std::chrono::microseconds(std::max<int64_t>(0, config::get_int("KOLO_SPIN_US")));
  const std::string mode = config::get_string("KOLO_YIELD_WHEN_IDLE");
  bool yield_at_once;
  if (mode == "1") {
    yield_at_once = true;
  } else if (mode == "0") {
    yield_at_once = false;
  } else if (mode == "auto") {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    yield_at_once = cpus > 0 && ranks_on_host > cpus;
  } else {
    throw InvalidArgument("KOLO_YIELD_WHEN_IDLE must be auto, 0 or 1, not '" + mode + "'");
  }
  if (yield_at_once) w.pure_spin_polls = 0;
  return w;
}

// "1.5", "60": a timeout in seconds as the error messages say it.
static std::string seconds_text(std::chrono::milliseconds t) {
  std::string secs = std::to_string(t.count() / 1000.0);
  secs.erase(secs.find_last_not_of('0') + 1);
  if (!secs.empty() && secs.back() == '.') secs.pop_back();
  return secs;
}

std::string describe_operation(const algo::CollArgs& args, uint64_t seq) {
  if (args.kind == algo::CollKind::recv && args.root < 0)
    return "recv from any source #" + std::to_string(seq) + " (tag " + std::to_string(args.tag) + ")";
  if (args.step_of)  // "allreduce on device memory, its allgather #3": #3 is the step's number on every rank
    return std::string(args.step_of) + " on device memory, its " + algo::coll_name(args.kind) + " #" + std::to_string(seq);
  return std::string(algo::coll_name(args.kind)) + " #" + std::to_string(seq);
}

std::string GroupInfo::label() const {
  if (!shares()) return "group " + name;
  return "group " + name + ", on the connections of group " + owner + " where this is rank " + std::to_string(to_ctx(rank));
}

std::string EngineComm::where() const {
  return describe_operation(args_, stamp_.seq) + " on rank " + std::to_string(group_.rank) + " of " +
         std::to_string(group_.size) + " (" + group_.label() + ")";
}

bool EngineComm::peek_p2p(int peer) {
  check_peer(peer);
  transport::Tag tag;
  uint64_t bytes = 0;
  if (!ctx_.pair(group_.to_ctx(peer)).peek_incoming(&tag, &bytes)) return false;
  // The sender-specific parts (its sequence number on the pair, count, dtype) are checked by
  // the real receive, which then names the sender of a mismatch; here only "is it meant for a
  // point-to-point receive with this tag".
  const Stamp s = decode(tag);
  return s.group == stamp_.group && s.kind == algo::CollKind::send && s.root_or_tag == args_.tag;
}

void EngineComm::receive_from(int peer) {
  check_peer(peer);
  if (!p2p_recv_seq_) throw std::logic_error("kolo: " + where() + ": no point-to-point counters to receive with");
  Stamp s = stamp_;
  s.seq = p2p_recv_seq_[peer]++;
  tag_ = encode(s);
  source_ = peer;
  waits_ = WaitFor{false, s.seq, peer};
}

void EngineComm::wait_for_arrival() {
  if (ctx_.has_failure()) raise_group_failure();
  if (ctx_.poll()) {
    arrival_spin_until_ = {};
    return;
  }
  const auto now = Clock::now();
  if (now >= deadline(now)) {
    throw TimeoutError("kolo: " + where() + " timed out after " + seconds_text(timeout_) +
                       " s: no rank sent this rank a message with tag " +
                       std::to_string(args_.tag) + " (a receive of " + std::to_string(args_.bytes()) +
                       " bytes); is the sender stuck, dead, or using another tag?");
  }
  if (arrival_spin_until_ == Clock::time_point{}) arrival_spin_until_ = now + wait_.spin;
  if (now < arrival_spin_until_) {
    std::this_thread::yield();
    return;
  }
  // Sleep until a device has something (a header arriving wakes it), then let the transports
  // read it, so that the caller's next peek sees it.
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline_ - now);
  ctx_.block(std::min(left, std::chrono::microseconds(50000)));
  ctx_.poll();
}

void EngineComm::bad_peer(int peer) const {
  throw std::logic_error("kolo: algorithm bug in " + where() + ": message to/from rank " + std::to_string(peer));
}

algo::Req EngineComm::isend(int peer, const void* buf, size_t bytes) {
  check_peer(peer);
  const int to = group_.to_ctx(peer);
  if (skip_sends_ > 0) {  // a direct attempt sent it before it handed the collective over
    --skip_sends_;
    ++sends_done_;  // still done if this attempt hands over too
    return sent();
  }
  if (ctx_.has_failure()) raise_group_failure();
  transport::Pair& pair = ctx_.pair(to);
  if (direct_) {
    // A full ring frees as the peer takes earlier messages: worth the same wait as a message
    // that has not arrived yet. Anything else goes the ordinary way at once.
    DirectSpin wait = spin();
    for (;;) {
      const auto now = pair.send_now(buf, bytes, tag_);
      if (now == transport::Pair::Now::sent) {
        ++sends_done_;
        return sent();
      }
      if (now == transport::Pair::Now::declined || !wait.again()) break;
    }
    if (!consumed_) hand_off();
  }
  pair.post_send(buf, bytes, tag_, &reqs_.next());
  return algo::Req{static_cast<int32_t>(reqs_.size() - 1)};
}

algo::Req EngineComm::irecv(int peer, void* buf, size_t bytes) {
  check_peer(peer);
  if (ctx_.has_failure()) raise_group_failure();
  const int from = group_.to_ctx(peer);
  if (direct_) {
    // One held receive per peer: a second one could only be checked for after the first was
    // taken, too late to hand off. A message longer than the pair ever takes at once (a tree's
    // forwarded blocks beyond one slot) would be waited for in vain for the whole spin.
    transport::Pair& pair = ctx_.pair(from);
    bool again = n_held_ == kMaxDirectRanks || bytes > pair.recv_now_max_bytes();
    for (int i = 0; i < n_held_ && !again; ++i) again = held_[i].pair == &pair;
    if (!again) {
      Request& q = reqs_.next();
      q.state = Request::State::idle;
      q.peer = from;
      q.is_send = false;
      q.bytes = bytes;
      const auto id = static_cast<int32_t>(reqs_.size() - 1);
      held_[n_held_++] = Held{id, buf, &pair};
      return algo::Req{id};
    }
    if (!consumed_) hand_off();
    post_held();
  }
  ctx_.pair(from).post_recv(buf, bytes, tag_, &reqs_.next());
  return algo::Req{static_cast<int32_t>(reqs_.size() - 1)};
}

void EngineComm::exchange(int peer, const void* out, size_t out_bytes, void* in, size_t in_bytes) {
  // The direct path's exchange with one peer when no receive is held: the send straight into
  // the pair, then the peer's message taken as it arrives, with no request on either side. Any
  // other case (the engine's run, held receives whose arrival must be checked together, a
  // message longer than the pair takes at once) is the four calls.
  if (!direct_ || n_held_ != 0) return Comm::exchange(peer, out, out_bytes, in, in_bytes);
  check_peer(peer);
  if (ctx_.has_failure()) raise_group_failure();
  transport::Pair& pair = ctx_.pair(group_.to_ctx(peer));
  if (in != nullptr && in_bytes > pair.recv_now_max_bytes()) return Comm::exchange(peer, out, out_bytes, in, in_bytes);
  DirectSpin patience = spin();
  algo::Req posted_send{};
  if (out != nullptr) {
    if (skip_sends_ > 0) {  // a direct attempt sent it before it handed the collective over
      --skip_sends_;
      ++sends_done_;
    } else {
      for (;;) {
        const auto now = pair.send_now(out, out_bytes, tag_);
        if (now == transport::Pair::Now::sent) {
          ++sends_done_;
          break;
        }
        if (now == transport::Pair::Now::declined || !patience.again()) {
          if (!consumed_) hand_off();
          pair.post_send(out, out_bytes, tag_, &reqs_.next());  // the ordinary way from here
          posted_send = algo::Req{static_cast<int32_t>(reqs_.size() - 1)};
          break;
        }
      }
    }
  }
  if (in != nullptr) {
    bool arrived = pair.recv_now(in, in_bytes, tag_);
    while (!arrived && patience.again()) arrived = pair.recv_now(in, in_bytes, tag_);
    if (arrived) {
      consumed_ = true;
    } else {
      if (!consumed_) hand_off();  // what went out is counted in sends_done_
      pair.post_recv(in, in_bytes, tag_, &reqs_.next());
      wait(algo::Req{static_cast<int32_t>(reqs_.size() - 1)});
    }
  }
  if (posted_send.valid()) wait(posted_send);
}

bool EngineComm::held_arrive() {
  DirectSpin wait = spin();
  for (;;) {
    bool all = true;
    for (int i = 0; i < n_held_ && all; ++i) {
      const Request& q = reqs_[static_cast<size_t>(held_[i].id)];
      if (q.state == Request::State::idle) all = held_[i].pair->recv_now(nullptr, q.bytes, tag_);
    }
    if (all) return true;
    if (!wait.again()) return false;
  }
}

void EngineComm::post_held() {
  direct_ = false;
  for (int i = 0; i < n_held_; ++i) {
    Request& q = reqs_[static_cast<size_t>(held_[i].id)];
    if (q.state == Request::State::idle) held_[i].pair->post_recv(held_[i].buf, q.bytes, tag_, &q);
  }
}

Request& EngineComm::get(algo::Req r) {
  if (r.id < 0 || static_cast<size_t>(r.id) >= reqs_.size()) throw std::logic_error("kolo: invalid request handle");
  return reqs_[static_cast<size_t>(r.id)];
}

bool EngineComm::test(algo::Req r) {
  if (r.id == kSentId) return true;
  Request& req = get(r);
  if (req.state == Request::State::idle) {  // held by a direct attempt: no polling for it here
    if (!consumed_) hand_off();
    post_held();
  }
  if (req.state == Request::State::pending) ctx_.poll();
  if (req.state == Request::State::failed) raise(req);
  if (req.state == Request::State::pending && ctx_.has_failure()) raise_group_failure();
  return req.state == Request::State::done;
}

void EngineComm::wait(algo::Req r) {
  if (r.id == kSentId) return;
  Request& req = get(r);
  if (req.state == Request::State::done) return;
  if (req.state == Request::State::idle) {  // a receive held by a direct attempt
    const Held* h = held_;
    while (h->id != r.id) ++h;
    if (!consumed_ && n_held_ == 1) {
      // The only one held: "has every held receive arrived?" is "has this one?", so take it as
      // soon as it is there, without looking at it first.
      DirectSpin wait = spin();
      while (!h->pair->recv_now(h->buf, req.bytes, tag_))
        if (!wait.again()) hand_off();
      consumed_ = true;
      req.state = Request::State::done;
      return;
    }
    if (!consumed_ && !held_arrive()) hand_off();
    if (h->pair->recv_now(h->buf, req.bytes, tag_)) {
      consumed_ = true;
      req.state = Request::State::done;
      return;
    }
    post_held();  // only once something was consumed: every held receive had arrived before
  }
  // A peer on another core answers a small message within a microsecond or two: poll that long
  // without a system call before yielding the core (not at all when ranks outnumber cores).
  const int pure_spin_polls = wait_.pure_spin_polls;
  // Reading the clock costs about as much as polling an idle shared-memory ring, so the loop
  // reads it only once it has stopped spinning purely, and while data keeps moving (other
  // requests' traffic) every kClockEvery polls, which still bounds the wait by its deadline.
  constexpr unsigned kClockEvery = 1024;
  Clock::time_point spin_until{};  // set at the first clock read: the spin window starts then
  int idle_polls = 0;
  unsigned polls = 0;
  while (req.state == Request::State::pending) {
    if (ctx_.has_failure()) raise_group_failure();
    const bool moved = ctx_.poll();
    if (req.state != Request::State::pending) break;
    ++polls;
    if (moved) {
      if (polls % kClockEvery != 0) continue;
    } else if (++idle_polls <= pure_spin_polls) {
      cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline(now)) raise_timeout(where(), timeout_, req, waits_.collective, waits_.seq, group_);
    if (moved) continue;
    if (spin_until == Clock::time_point{}) spin_until = now + wait_.spin;
    if (now >= spin_until) {
      // The slow path: say whom we wait for (the flight recorder shows it if we never return).
      // The Context's numbering: the flight recorder is the owner's, even for a sharing subgroup.
      if (waiting_slot_) waiting_slot_->store(req.peer, std::memory_order_relaxed);
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline_ - now);
      ctx_.block(std::min(left, std::chrono::microseconds(50000)));
    } else {
      // Let the peer's threads run when cores are scarce (more threads than cores).
      std::this_thread::yield();
    }
  }
  if (req.state == Request::State::failed) raise(req);
}

std::string format_timeout(const std::string& where, std::chrono::milliseconds timeout, const Request& r,
                           const Blame* blame) {
  const std::string secs = seconds_text(timeout);
  std::string msg = "kolo: " + where + " timed out after " + secs + " s waiting for rank " + std::to_string(r.peer) + " (" +
                    (r.is_send ? "send" : "receive") + " of " + std::to_string(r.bytes) + " bytes, " +
                    std::to_string(r.transferred) + " done)";
  if (!blame) return msg + "; is rank " + std::to_string(r.peer) + " stuck, dead, or calling a different collective?";
  for (size_t i = 1; i < blame->chain.size(); ++i) msg += ", which waits for rank " + std::to_string(blame->chain[i]);
  const std::string culprit = std::to_string(blame->culprit());
  return msg + "; rank " + culprit + " did not report: is rank " + culprit + " stuck, dead or unreachable?";
}

void raise_timeout(const std::string& where, std::chrono::milliseconds timeout, const Request& r, const WaitFor& w,
                   const BlameBoard* board) {
  const std::optional<Blame> blame = board ? board->settle(w, timeout) : std::nullopt;
  throw TimeoutError(format_timeout(where, timeout, r, blame ? &*blame : nullptr), blame ? blame->culprit() : r.peer);
}

void raise_timeout(const std::string& where, std::chrono::milliseconds timeout, const Request& r, bool collective,
                   uint64_t seq, const GroupInfo& g) {
  const int peer = g.from_ctx_peer(r.peer);
  if (!g.shares()) raise_timeout(where, timeout, r, WaitFor{collective, seq, peer}, g.blame.get());
  Request mine = r;  // the error path of a sharing group: a copy that names the peer in its ranks
  mine.peer = peer;
  raise_timeout(where, timeout, mine, WaitFor{collective, seq, peer}, g.blame.get());
}

// "rank 1" in a group that owns its connections; "rank 1 (rank 3 of group default)" in one that
// shares another's.
static std::string peer_name(const GroupInfo& g, int ctx_peer) {
  const std::string here = "rank " + std::to_string(g.from_ctx_peer(ctx_peer));
  if (!g.shares()) return here;
  return here + " (rank " + std::to_string(ctx_peer) + " of group " + g.owner + ")";
}

void raise_request_failure(const std::string& where, const Request& r, const Context& ctx, const GroupInfo& g) {
  if (r.failure == Failure::tag_mismatch || r.failure == Failure::size_mismatch) {
    Stamp mine = decode(r.tag), theirs = decode(r.got_tag);
    // Name the groups when the message belongs to another group on the same connections (parent
    // and sharing child issued in different orders on the two ranks).
    const bool other_group = mine.group != theirs.group;
    const std::string theirs_group = other_group ? ctx.group_name(theirs.group) : "";
    const std::string mine_group = other_group ? ctx.group_name(mine.group) : "";
    std::string msg = "kolo: " + where + ": " + peer_name(g, r.peer) + " sent a message for " + describe(theirs, theirs_group);
    if (r.failure == Failure::size_mismatch || r.got_bytes != r.bytes)
      msg += " of " + std::to_string(r.got_bytes) + " bytes";
    msg += " where this rank expected " + describe(mine, mine_group);
    if (r.got_bytes != r.bytes) msg += " of " + std::to_string(r.bytes) + " bytes";
    msg += other_group ? ". Groups that share connections must issue their operations in the same order on every rank."
                       : ". Every rank must issue the same collectives, with matching arguments, in the same order.";
    throw MismatchError(msg, g.from_ctx_peer(r.peer));
  }
  // The transport's own failure, or the group's first failure if this request was failed
  // because another connection broke.
  if (ctx.has_failure()) raise_failure(where, as_seen_by(g, ctx.failure()));
  std::string detail = r.detail;
  if (g.shares()) detail += " (" + peer_name(g, r.peer) + ")";
  throw PeerError("kolo: " + where + " failed: " + detail, g.from_ctx_peer(r.peer));
}

PeerFailure as_seen_by(const GroupInfo& g, PeerFailure f) {
  if (!g.shares() || f.peer < 0) return f;
  const int here = g.from_ctx_peer(f.peer);
  const std::string theirs = "rank " + std::to_string(f.peer) + " of group " + g.owner;
  f.detail += " (ranks named above are those of group " + g.owner + "; " + theirs +
              (here >= 0 ? " is rank " + std::to_string(here) + " of group " + g.name : " is not in group " + g.name) + ")";
  f.peer = here;
  return f;
}

void raise_failure(const std::string& where, const PeerFailure& f) {
  std::string msg = "kolo: " + where + " failed: " + f.detail;
  switch (f.kind) {
    case ErrorKind::timeout: throw TimeoutError(msg, f.peer);
    case ErrorKind::mismatch: throw MismatchError(msg, f.peer);
    case ErrorKind::peer: break;
  }
  throw PeerError(msg, f.peer);
}

void classify(const std::exception& e, int* culprit, ErrorKind* kind) {
  *culprit = -1;
  *kind = ErrorKind::peer;
  if (auto* m = dynamic_cast<const MismatchError*>(&e)) {
    *culprit = m->peer_rank();
    *kind = ErrorKind::mismatch;
  } else if (auto* p = dynamic_cast<const PeerError*>(&e)) {
    *culprit = p->peer_rank();
  } else if (auto* t = dynamic_cast<const TimeoutError*>(&e)) {
    *culprit = t->peer_rank();
    *kind = ErrorKind::timeout;
  }
}

void EngineComm::raise(const Request& r) { raise_request_failure(where(), r, ctx_, group_); }

void EngineComm::raise_group_failure() {
  PeerFailure f = ctx_.failure();
  if (f.why == Failure::tag_mismatch || f.why == Failure::size_mismatch) {
    // Find the request that saw it to report both sides.
    for (size_t i = 0; i < reqs_.size(); ++i) {
      const Request& r = reqs_[i];
      if (r.state == Request::State::failed && (r.failure == Failure::tag_mismatch || r.failure == Failure::size_mismatch))
        raise(r);
    }
  }
  raise_failure(where(), as_seen_by(group_, f));
}

void EngineComm::reduce(void* dst, const void* src, size_t count) {
  kernels::reduce_inplace(args_.dtype, args_.op.kind, dst, src, count);
}

void EngineComm::reduce(void* dst, const void* a, const void* b, size_t count) {
  kernels::reduce(args_.dtype, args_.op.kind, dst, a, b, count);
}

void EngineComm::finalize(void* data, size_t count) { kernels::finalize(args_.dtype, args_.op, data, count, group_.size); }

void* EngineComm::scratch(size_t bytes, int slot) { return scratch_.get(bytes, slot); }

}  // namespace kolo::engine

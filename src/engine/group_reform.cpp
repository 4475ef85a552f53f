// Re-forming a group: shrink (the survivors of a loss, shrink.hpp's agreement), grow (members
// admit joiners, grow.hpp) and join (a joiner's side), each a new group with connections of its own.
#include <algorithm>
#include <optional>

#include "common/config.hpp"
#include "engine/group_impl.hpp"
#include "engine/grow.hpp"
#include "engine/shrink.hpp"

namespace kolo {

using Clock = std::chrono::steady_clock;

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
  // A bootstrap under the generation's prefix that keeps the connections between members where
  // their transport can hand them over (Device::hand_over: resynchronised, nothing of the old
  // group crosses) and connects the rest. Only the members' connections are offered; the old
  // group keeps the others, failed, until it goes. A subgroup that shares its parent's
  // connections does not own them to give away: it connects anew.
  std::unique_ptr<ProcessGroup::Impl> next;
  const auto connect_start = Clock::now();
  auto connect = [&](const engine::Reuse* reuse) {
    next = connect_impl(impl.store, impl.root_prefix + suffix, impl.root_name + suffix, new_rank,
                        static_cast<int>(members.size()), impl.timeout, &impl.secret, "", impl.transport, timeout, reuse);
  };
  // Connecting anew, this rank still says so in the store (an offer of nothing): a peer that
  // offers its connections waits for every member's offer.
  engine::Reuse none;
  none.old_prefix = impl.prefix;
  // Under the old executor's run lock, after its abort has run: nothing of the old group
  // touches these connections while they change hands. Not to be had (a completion callback
  // shrinking on the engine thread, or one the direct path runs under the lock): anew.
  const auto lock_until = Clock::now() + std::clamp(timeout / 8, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
  if (impl.shared || config::get_int("KOLO_SHRINK_REUSE") == 0 ||
      !impl.executor->with_failed_connections(
          [&](engine::Context& old) {
            engine::Reuse reuse;
            reuse.old = &old;
            reuse.old_prefix = impl.prefix;
            for (int m : members) reuse.old_peer.push_back(m);  // the Context numbers peers as the group does
            connect(&reuse);
          },
          lock_until))
    connect(&none);
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
                          << members.size() << " in generation " << generation << " (" << impl.root_name << suffix
                          << "), keeping " << next->carried << " of its connections (connected in "
                          << std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - connect_start).count()
                          << " us)");
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

// The last group of a line that grow or join was used on tells the joiners still waiting that
// nobody will admit them (grow.hpp, "closed"); a group that shrank or grew leaves that to its
// successor. Best effort: the store may be gone with the job.
void announce_end_of_line(ProcessGroup::Impl& impl) {
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

}  // namespace kolo

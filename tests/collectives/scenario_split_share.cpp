// Scenarios about subgroups that share their parent's connections (SplitOptions
// .share_connections); test_split_share.cpp checks what they print and how they end.
//
// "split-share MODE" (MODE share, connect, or env: SplitOptions left unset, KOLO_SPLIT_SHARE decides): split(rank % 2, rank) and, inside it, a sharing
// split with the members in reverse order (nested: its ranks map through two levels). Prints the
// sockets the splits opened ("sockets split +N", "sockets nested +N"; sharing: +0), then runs a
// sample of the correctness matrix of every collective on the child, the grandchild and the
// world in turn, each result checked element by element against the reference, some of them in
// flight together, and prints the sockets opened meanwhile ("sockets after +N"). A non-sharing
// split of the sharing child must open connections of its own ("sockets fresh +N", N > 0) and
// work. Destroying the children leaves the world working; then a new sharing child outlives the
// world group's shutdown (the world refuses operations, the child keeps working on its
// connections, and closes them when it is shut down).
//
// "split-share-misorder": world rank 0 runs a child all-reduce and then a world all-to-all; the
// others run them the other way round. Rank 0 and its child partner, rank 2, must fail with a
// MismatchError naming both groups.
//
// "split-share-disagree": rank 0 asks for an ordinary split, the others for a sharing one: every
// rank must refuse it (InvalidArgument naming the ranks that differ) instead of half of them
// waiting for connections that never come.
//
// "split-share-kill": child and world all-reduces in turn (checked) until the driver kills the
// last rank; every survivor must fail naming it, in the numbering of the group whose operation
// was running (printed as the case name: "child ..." or "world ...").
#include <cstdlib>
#include <string>
#include <vector>

#include "matrix_run.hpp"
#include "open_sockets.hpp"
#include "reference.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

using kolo::testing_support::open_sockets;

// About `want` cases of collective `c` at group size `n`, spread over its matrix (different
// algorithms, dtypes, counts, roots); `turn` shifts the sample so that groups run different ones.
std::vector<MatrixCase> sample(Coll c, int n, size_t want, size_t turn) {
  std::vector<MatrixCase> all = matrix_cases(c, n), out;
  if (all.empty()) return out;
  const size_t stride = std::max<size_t>(1, all.size() / want);
  for (size_t i = turn % stride; i < all.size(); i += stride) out.push_back(all[i]);
  return out;
}

// A world all-reduce and a child all-reduce issued together, then waited for: on a sharing
// child they run one after the other on one engine thread, in this order on every rank.
void in_flight_together(ProcessGroup& world, ProcessGroup& child, const std::vector<int>& members, CheckLog& log) {
  log.begin_case("world and child all-reduce in flight together");
  std::vector<int64_t> a(3000, world.rank() + 1), b(3000, 1);
  WorkPtr wc = child.allreduce(Buffer(a.data(), a.size()));
  WorkPtr ww = world.allreduce(Buffer(b.data(), b.size()));
  ww->wait();
  wc->wait();
  long double sum = 0;
  for (int m : members) sum += m + 1;
  log.expect_elements("child allreduce", DataType::int64, a.data(), a.size(), [&](size_t) { return sum; });
  log.expect_elements("world allreduce", DataType::int64, b.data(), b.size(),
                      [&](size_t) { return static_cast<long double>(world.size()); });
}

SplitOptions sharing(bool share) {
  SplitOptions o;
  o.share_connections = share;
  return o;
}

SplitOptions mode_options(const std::string& mode) {
  if (mode == "env") return SplitOptions{};  // KOLO_SPLIT_SHARE decides
  return sharing(mode == "share");
}

void expect_members(ProcessGroup& g, const std::vector<int>& members, int world_rank, CheckLog& log) {
  int32_t mine = world_rank;
  std::vector<int32_t> got(members.size(), -1);
  g.allgather(Buffer(&mine, 1), Buffer(got.data(), got.size()))->wait();
  log.expect_elements("members (allgather of world ranks)", DataType::int32, got.data(), got.size(),
                      [&](size_t i) { return static_cast<long double>(members[i]); });
}

}  // namespace

void scenario_split_share(WorkerContext& ctx) {
  const SplitOptions opts = mode_options(ctx.args.empty() ? "connect" : ctx.args[0]);
  const size_t per_coll = ctx.args.size() > 1 ? std::stoul(ctx.args[1]) : 6;
  ProcessGroup& world = ctx.join();
  const int n = world.size(), r = world.rank();
  world.barrier()->wait();  // every eager connection is open
  const int base = open_sockets();

  ctx.log.begin_case("split(rank % 2, rank)");
  std::shared_ptr<ProcessGroup> child = world.split(r % 2, r, opts);
  ctx.say("sockets split +" + std::to_string(open_sockets() - base));
  std::vector<int> members;  // world ranks, in child order
  for (int m = 0; m < n; ++m)
    if (m % 2 == r % 2) members.push_back(m);
  ctx.log.expect(child->size() == static_cast<int>(members.size()) && child->rank() == r / 2, "child rank and size");
  expect_members(*child, members, r, ctx.log);

  ctx.log.begin_case("nested split, reversed");
  std::shared_ptr<ProcessGroup> grand = child->split(0, -child->rank(), opts);
  const std::vector<int> grand_members(members.rbegin(), members.rend());
  ctx.say("sockets nested +" + std::to_string(open_sockets() - base));
  expect_members(*grand, grand_members, r, ctx.log);

  // Made by the members alone (as kolo_torch does for torch's new_group): shares when sharing is
  // on, else is not made at all.
  ctx.log.begin_case("subgroup_of_members");
  const char* env = std::getenv("KOLO_SPLIT_SHARE");
  const bool sharing_on = opts.share_connections.value_or(env != nullptr && std::string(env) == "1");
  std::shared_ptr<ProcessGroup> by_members = world.subgroup_of_members(grand_members, opts);
  ctx.log.expect((by_members != nullptr) == sharing_on, "subgroup_of_members made a group iff sharing is on");
  if (by_members) {
    ctx.log.expect(by_members->rank() == static_cast<int>(grand_members.size()) - 1 - r / 2, "members-only rank");
    expect_members(*by_members, grand_members, r, ctx.log);
    for (const MatrixCase& c : sample(Coll::allreduce, by_members->size(), 3, 5)) {
      ctx.log.begin_case("by members: " + c.describe());
      run_matrix_case(*by_members, c, 1000, ctx.log);
    }
  }

  uint32_t salt = 0;
  size_t turn = 0;
  for (Coll c : all_colls()) {
    const auto in_child = sample(c, child->size(), per_coll, turn++);
    const auto in_grand = sample(c, grand->size(), 2, turn++);
    const auto in_world = sample(c, n, 2, turn++);
    for (size_t i = 0; i < in_child.size(); ++i) {
      ctx.log.begin_case("child: " + in_child[i].describe());
      run_matrix_case(*child, in_child[i], ++salt, ctx.log);
      if (i < in_world.size()) {
        ctx.log.begin_case("world: " + in_world[i].describe());
        run_matrix_case(world, in_world[i], ++salt, ctx.log);
      }
      if (i < in_grand.size()) {
        ctx.log.begin_case("grandchild: " + in_grand[i].describe());
        run_matrix_case(*grand, in_grand[i], ++salt, ctx.log);
      }
    }
  }
  in_flight_together(world, *child, members, ctx.log);
  ctx.say("sockets after +" + std::to_string(open_sockets() - base));

  ctx.log.begin_case("non-sharing split of the child");
  const int before_fresh = open_sockets();
  std::shared_ptr<ProcessGroup> fresh = child->split(0, child->rank(), sharing(false));
  ctx.say("sockets fresh +" + std::to_string(open_sockets() - before_fresh));
  expect_members(*fresh, members, r, ctx.log);
  fresh->shutdown();

  ctx.log.begin_case("world after the children are gone");
  if (by_members) by_members->shutdown();
  grand->shutdown();
  grand.reset();
  child->shutdown();
  child.reset();
  for (const MatrixCase& c : sample(Coll::allreduce, n, 3, 7)) run_matrix_case(world, c, ++salt, ctx.log);

  ctx.log.begin_case("a sharing child outlives its parent's shutdown");
  std::shared_ptr<ProcessGroup> survivor = world.split(r % 2, -r, opts);
  const std::vector<int> reversed(members.rbegin(), members.rend());
  world.shutdown();
  bool refused = false;
  try {
    world.barrier();
  } catch (const Error&) {
    refused = true;
  }
  ctx.log.expect(refused, "the world group accepted an operation after shutdown()");
  expect_members(*survivor, reversed, r, ctx.log);
  for (Coll c : {Coll::allreduce, Coll::allgather, Coll::broadcast, Coll::sendrecv})
    for (const MatrixCase& mc : sample(c, survivor->size(), 2, 3)) {
      ctx.log.begin_case("survivor: " + mc.describe());
      run_matrix_case(*survivor, mc, ++salt, ctx.log);
    }
  survivor->shutdown();  // the last group on the world's connections: it closes them
  ctx.log.end_case();
}

void scenario_split_share_misorder(WorkerContext& ctx) {
  ProcessGroup& world = ctx.join();
  const int n = world.size(), r = world.rank();
  std::shared_ptr<ProcessGroup> child = world.split(r % 2, r, sharing(true));
  world.barrier()->wait();
  std::vector<int64_t> a(64, 1), out(static_cast<size_t>(n) * 8, r), in(static_cast<size_t>(n) * 8);
  auto child_op = [&] {
    ctx.log.begin_case("child allreduce");
    child->allreduce(Buffer(a.data(), a.size()))->wait();
  };
  auto world_op = [&] {
    ctx.log.begin_case("world alltoall");
    world.alltoall(Buffer(out.data(), out.size()), Buffer(in.data(), in.size()))->wait();
  };
  if (r == 0) {
    child_op();
    world_op();
  } else {
    world_op();
    child_op();
  }
  ctx.log.end_case();
}

void scenario_split_share_disagree(WorkerContext& ctx) {
  ProcessGroup& world = ctx.join();
  ctx.log.begin_case("split with rank 0 not sharing");
  world.split(0, world.rank(), sharing(world.rank() != 0));
  ctx.log.end_case();
}

void scenario_split_share_kill(WorkerContext& ctx) {
  ProcessGroup& world = ctx.join();
  const int n = world.size(), r = world.rank();
  std::shared_ptr<ProcessGroup> child = world.split(r % 2, r, sharing(true));
  long double child_sum = 0;
  for (int m = r % 2; m < n; m += 2) child_sum += m + 1;
  for (int i = 0;; ++i) {
    if (i == 20 && r == n - 1) ctx.say("loop started");
    std::vector<int64_t> a(4096, r + 1), b(4096, 1);
    ctx.log.begin_case("child allreduce " + std::to_string(i));
    child->allreduce(Buffer(a.data(), a.size()))->wait();
    ctx.log.expect_elements("child allreduce", DataType::int64, a.data(), a.size(), [&](size_t) { return child_sum; });
    ctx.log.begin_case("world allreduce " + std::to_string(i));
    world.allreduce(Buffer(b.data(), b.size()))->wait();
    ctx.log.expect_elements("world allreduce", DataType::int64, b.data(), b.size(),
                            [&](size_t) { return static_cast<long double>(n); });
  }
}

}  // namespace kolo::coltest

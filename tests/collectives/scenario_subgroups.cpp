// Scenario "subgroups": split(color = rank % 2, key = -rank) and new_group({last, 0, 1}), then
// collectives inside them, interleaved with collectives on the world group. Proves that a
// subgroup has the right members in the right order (rank() = position by (key, rank), or in
// the list), that its collectives combine exactly its members' data, and that subgroup and
// world collectives do not interfere.
#include <algorithm>
#include <vector>

#include "reference.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

// Runs an allreduce, an allgather and a broadcast on `sub`, whose members are `members` (world
// ranks, in subgroup rank order), and checks them against the members' data.
void check_subgroup(ProcessGroup& sub, const std::vector<int>& members, int world_rank, CheckLog& log) {
  const int me = static_cast<int>(std::find(members.begin(), members.end(), world_rank) - members.begin());
  log.expect(sub.size() == static_cast<int>(members.size()),
             "subgroup size " + std::to_string(sub.size()) + ", expected " + std::to_string(members.size()));
  log.expect(sub.rank() == me, "subgroup rank " + std::to_string(sub.rank()) + ", expected " + std::to_string(me));

  // allreduce: the sum of the members' (world rank + 1) * (i + 1).
  constexpr size_t kCount = 37;
  std::vector<int64_t> sum(kCount);
  for (size_t i = 0; i < kCount; ++i) sum[i] = (world_rank + 1) * static_cast<int64_t>(i + 1);
  sub.allreduce(Buffer(sum.data(), kCount))->wait();
  int64_t rank_sum = 0;
  for (int m : members) rank_sum += m + 1;
  log.expect_elements("subgroup allreduce", DataType::int64, sum.data(), kCount,
                      [&](size_t i) { return static_cast<long double>(rank_sum * static_cast<int64_t>(i + 1)); });

  // allgather of world ranks: the member list itself, in subgroup order.
  int32_t mine = world_rank;
  std::vector<int32_t> gathered(members.size(), -1);
  sub.allgather(Buffer(&mine, 1), Buffer(gathered.data(), gathered.size()))->wait();
  log.expect_elements("subgroup allgather", DataType::int32, gathered.data(), gathered.size(),
                      [&](size_t i) { return static_cast<long double>(members[i]); });

  // broadcast from the subgroup's last rank.
  const int root = sub.size() - 1;
  std::vector<float> data(101);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = sub.rank() == root ? static_cast<float>(data_value(DataType::float32, members[root], i, 5)) : -1.0f;
  BroadcastOptions o;
  o.root = root;
  sub.broadcast(Buffer(data.data(), data.size()), o)->wait();
  log.expect_elements("subgroup broadcast", DataType::float32, data.data(), data.size(),
                      [&](size_t i) { return data_value(DataType::float32, members[root], i, 5); });
}

// A world allreduce, checked: proves the world group still works between subgroup calls.
void check_world(ProcessGroup& world, CheckLog& log) {
  std::vector<int32_t> v(10, world.rank() + 1);
  world.allreduce(Buffer(v.data(), v.size()))->wait();
  const long double n = world.size();
  log.expect_elements("world allreduce", DataType::int32, v.data(), v.size(), [&](size_t) { return n * (n + 1) / 2; });
}

}  // namespace

void scenario_subgroups(WorkerContext& ctx) {
  ProcessGroup& world = ctx.join();
  const int n = world.size();
  const int r = world.rank();

  ctx.log.begin_case("split(rank % 2, -rank)");
  std::shared_ptr<ProcessGroup> parity = world.split(r % 2, -r);
  // Ordered by key = -rank: the same parity, highest world rank first.
  std::vector<int> parity_members;
  for (int m = n - 1; m >= 0; --m)
    if (m % 2 == r % 2) parity_members.push_back(m);
  ctx.log.expect(parity != nullptr, "split returned no group");
  if (parity) check_subgroup(*parity, parity_members, r, ctx.log);
  check_world(world, ctx.log);

  ctx.log.begin_case("split with color -1 on rank 0");
  std::shared_ptr<ProcessGroup> without_zero = world.split(r == 0 ? -1 : 0, r);
  ctx.log.expect((r == 0) == (without_zero == nullptr), "color -1 must give nullptr, any other color a group");
  std::vector<int> nonzero;
  for (int m = 1; m < n; ++m) nonzero.push_back(m);
  if (without_zero) check_subgroup(*without_zero, nonzero, r, ctx.log);

  if (n >= 3) {
    ctx.log.begin_case("new_group({last, 0, 1})");
    const std::vector<int> listed{n - 1, 0, 1};
    std::shared_ptr<ProcessGroup> trio = world.new_group(listed);
    const bool member = std::find(listed.begin(), listed.end(), r) != listed.end();
    ctx.log.expect(member == (trio != nullptr), member ? "a member got no group" : "a non-member got a group");
    if (trio) check_subgroup(*trio, listed, r, ctx.log);
    check_world(world, ctx.log);
  }

  // Both groups busy at once: a subgroup allreduce and a world allreduce in flight together.
  ctx.log.begin_case("subgroup and world collectives in flight together");
  if (parity) {
    std::vector<int64_t> a(1000, r);
    std::vector<int64_t> b(1000, 1);
    WorkPtr sub_work = parity->allreduce(Buffer(a.data(), a.size()));
    WorkPtr world_work = world.allreduce(Buffer(b.data(), b.size()));
    world_work->wait();
    sub_work->wait();
    long double parity_sum = 0;
    for (int m : parity_members) parity_sum += m;
    ctx.log.expect_elements("subgroup allreduce", DataType::int64, a.data(), a.size(), [&](size_t) { return parity_sum; });
    ctx.log.expect_elements("world allreduce", DataType::int64, b.data(), b.size(), [&](size_t) { return static_cast<long double>(n); });
    parity->shutdown();
  }
  if (without_zero) without_zero->shutdown();
  ctx.log.end_case();
}

}  // namespace kolo::coltest

// Scenario "sharded": ShardedDataParallel on the test model (odd sizes, a padding gap, an empty
// parameter), on rank counts that do and do not divide its buckets. Checked against values
// computed here, independently of kolo: the shards of all ranks cover every bucket element once
// (tails on every rank); after finish() a rank's shard holds the exact mean, also after no_sync
// accumulation; grad_norm() is the norm of the whole mean; gather_params() gives every rank
// every rank's updates; take_shard/gather_state round-trip a flat state. Scenario
// "sharded-mismatch": a rank running DistributedDataParallel against ShardedDataParallel ranks
// is refused by the layout agreement on every rank.
#include <cmath>
#include <string>

#include "test_model.hpp"
#include "worker.hpp"

namespace kolo::ddptest {
namespace {

// How many ranks own each element (a tail counts once: it is replicated, not split).
std::vector<int> owners(const std::vector<DdpBucket>& buckets, size_t total, int world) {
  std::vector<int> count(total, 0);
  for (int r = 0; r < world; ++r)
    for (const ShardRange& s : plan_shard(buckets, r, world))
      if (!s.replicated || r == 0)
        for (size_t i = s.offset; i < s.offset + s.count; ++i) ++count[i];
  return count;
}

bool in_shard(const std::vector<ShardRange>& shard, size_t i) {
  for (const ShardRange& s : shard)
    if (i >= s.offset && i < s.offset + s.count) return true;
  return false;
}

void check_partition(Worker& w, const ShardedDataParallel& zero, size_t total, int world) {
  w.begin("the shards partition the buckets");
  const std::vector<int> count = owners(zero.buckets(), total, world);
  std::vector<uint8_t> in_bucket(total, 0);
  for (const DdpBucket& b : zero.buckets())
    for (size_t i = b.offset; i < b.offset + b.count; ++i) in_bucket[i] = 1;
  size_t wrong = 0;
  for (size_t i = 0; i < total; ++i) wrong += count[i] != (in_bucket[i] ? 1 : 0);
  w.expect(wrong == 0, std::to_string(wrong) + " elements owned by no rank or by several");
  size_t tails = 0, mine = 0;
  for (const ShardRange& s : zero.shard()) {
    tails += s.replicated;
    mine += s.count;
  }
  w.expect(mine == zero.shard_elements(), "shard_elements() = " + std::to_string(zero.shard_elements()));
  // 4 ranks divide only the first of the test model's three buckets (1464, 2517, 1551 elements):
  // the tail path must be exercised there.
  if (world == 4) w.expect(tails == 2, std::to_string(tails) + " buckets have a tail on 4 ranks, expected 2");
}

// The mean gradient of `steps` over ranks at element i (every bucket element, gaps included).
float mean_at(int world, size_t i, const std::vector<int>& steps) { return reference_mean(exact_grad, world, i, steps); }

void check_mean(Worker& w, const ShardedDataParallel& zero, const std::vector<float>& grads, int world,
                const std::vector<int>& steps, const char* what) {
  size_t wrong = 0;
  for (const ShardRange& s : zero.shard())
    for (size_t i = s.offset; i < s.offset + s.count; ++i)
      if (grads[i] != mean_at(world, i, steps) && ++wrong <= 3)
        w.expect(false, std::string(what) + ": grads[" + std::to_string(i) + "] = " + std::to_string(grads[i]) +
                            ", expected " + std::to_string(mean_at(world, i, steps)));
  w.expect(wrong == 0, std::string(what) + ": " + std::to_string(wrong) + " wrong shard elements");
}

}  // namespace

void scenario_sharded(Worker& w) {
  const int world = w.group->size(), rank = w.group->rank();
  const std::vector<DdpParam> layout = model_layout();
  const size_t total = model_total(layout);
  std::vector<float> params(total), grads(total, 0.0f);
  for (size_t i = 0; i < total; ++i) params[i] = initial_param(rank, i);
  ShardedDataParallel zero(w.group, params.data(), grads.data(), total, layout, model_options());
  check_partition(w, zero, total, world);
  w.expect(zero.shard().size() == plan_shard(zero.buckets(), rank, world).size(), "shard() is not plan_shard()");

  w.begin("a shard holds the exact mean after finish()");
  for (size_t i = 0; i < total; ++i) grads[i] = exact_grad(rank, i, 0);
  for (size_t p = layout.size(); p-- > 0;) zero.mark_grad_ready(p);
  zero.finish();
  check_mean(w, zero, grads, world, {0}, "one step");

  w.begin("grad_norm() is the norm of the whole mean");
  double sum = 0;
  for (const DdpBucket& b : zero.buckets())
    for (size_t i = b.offset; i < b.offset + b.count; ++i) sum += double(mean_at(world, i, {0})) * mean_at(world, i, {0});
  const double norm = zero.grad_norm();
  w.expect(std::fabs(norm - std::sqrt(sum)) <= 1e-12 * std::sqrt(sum),
           "grad_norm() = " + std::to_string(norm) + ", expected " + std::to_string(std::sqrt(sum)));

  w.begin("no_sync accumulates, then the next step reduce-scatters the sums");
  for (size_t i = 0; i < total; ++i) grads[i] = 0.0f;
  {
    auto local = zero.no_sync();
    for (int step = 1; step <= 2; ++step) {
      for (size_t i = 0; i < total; ++i) grads[i] += exact_grad(rank, i, step);
      for (size_t p = layout.size(); p-- > 0;) zero.mark_grad_ready(p);
      zero.finish();
      w.expect(zero.last_step_stats().buckets == 0, "a no_sync step communicated");
    }
  }
  for (size_t i = 0; i < total; ++i) grads[i] += exact_grad(rank, i, 3);
  zero.finish();  // marks everything itself
  check_mean(w, zero, grads, world, {1, 2, 3}, "accumulated");

  w.begin("gather_params() brings every rank's shard to all");
  const auto updated = [](size_t i) { return 0.25f * static_cast<float>(i) - 7.0f; };
  for (size_t i = 0; i < total; ++i) params[i] = in_shard(zero.shard(), i) ? updated(i) : -1.0f - float(rank);
  const size_t outside_from = layout.back().offset + layout.back().count;  // the model's tail, in no bucket
  zero.gather_params();
  size_t wrong = 0;
  for (size_t i = 0; i < total; ++i) wrong += params[i] != (i < outside_from ? updated(i) : -1.0f - float(rank));
  w.expect(wrong == 0, std::to_string(wrong) + " parameters wrong after gather_params()");

  w.begin("take_shard and gather_state round-trip a flat state");
  std::vector<float> full(total), state(zero.shard_elements());
  for (size_t i = 0; i < total; ++i) full[i] = 3.0f + 0.5f * static_cast<float>(i);
  zero.take_shard(full.data(), state.data());
  for (int root : {0, world - 1}) {
    std::vector<float> back(total, -9.0f);
    zero.gather_state(state.data(), rank == root ? back.data() : nullptr, root);
    if (rank != root) continue;
    wrong = 0;
    for (size_t i = 0; i < total; ++i) wrong += back[i] != (i < outside_from ? full[i] : -9.0f);
    w.expect(wrong == 0, std::to_string(wrong) + " elements wrong on root " + std::to_string(root));
  }
}

void scenario_sharded_mismatch(Worker& w) {
  w.begin("DistributedDataParallel on rank 1, ShardedDataParallel elsewhere");
  const std::vector<DdpParam> layout = model_layout();
  const size_t total = model_total(layout);
  std::vector<float> params(total, 1.0f), grads(total, 0.0f);
  std::string text;
  try {
    if (w.group->rank() == 1)
      DistributedDataParallel ddp(w.group, params.data(), grads.data(), total, layout, model_options());
    else
      ShardedDataParallel zero(w.group, params.data(), grads.data(), total, layout, model_options());
  } catch (const MismatchError& e) {
    text = e.what();
  }
  w.expect(text.find("rank 1 runs DistributedDataParallel where rank 0 runs ShardedDataParallel") != std::string::npos,
           "no MismatchError naming the modes: '" + text + "'");
}

}  // namespace kolo::ddptest

// One optimizer step's forward and backward passes on this rank, with DDP: `accum` micro-batches
// over this rank's share of the global batch. The first accum-1 run under DDP's no_sync
// (gradients add up locally, nothing is sent); the last one marks every parameter ready as
// backward finalises it, so each bucket's all-reduce starts while backward still works on
// earlier layers. Each micro-batch's mean loss is scaled by its samples * ranks / global_batch
// (1/accum when the shares are even), so that after the reducer's average over the ranks the
// gradients are those of the mean loss over the whole global batch, on every rank (on its shard,
// with ShardedDataParallel), also when the shares differ by one (kolo-train --elastic).
#pragma once
#include <string>
#include <vector>

#include "corpus.hpp"
#include "kolo/ddp.hpp"
#include "kolo/error.hpp"
#include "kolo/sharded_ddp.hpp"

namespace kolo::train {

// Zeroes the gradients, runs the micro-steps on `samples` (this rank's share of global_batch
// window indices, cut into `accum` micro-batches as evenly as possible) and ddp.finish().
// Returns this rank's loss, the mean over its samples. Model: gpt::Model<float> or
// gpt::CudaModel (the same forward, backward and zero_grad). Reducer: DistributedDataParallel or
// ShardedDataParallel (the same marks, no_sync, finish and group).
template <class Model, class Reducer>
double forward_backward(Model& model, Reducer& ddp, const TokenWindows& windows, const std::vector<size_t>& samples,
                        size_t global_batch, int accum) {
  const size_t n = samples.size(), parts = size_t(accum);
  if (n < parts || global_batch < n)
    throw InvalidArgument("forward_backward: " + std::to_string(n) + " samples for accum " + std::to_string(accum) +
                          " of a global batch of " + std::to_string(global_batch));
  const int seq = model.config().seq;
  const size_t ranks = size_t(ddp.group().size());
  model.zero_grad();
  double loss_sum = 0;
  std::vector<int> inputs, targets;
  for (size_t micro = 0; micro < parts; ++micro) {
    const size_t begin = micro * n / parts, end = (micro + 1) * n / parts;
    inputs.clear();
    targets.clear();
    for (size_t i = begin; i < end; ++i) windows.append(samples[i], inputs, targets);
    const int count = int(end - begin);
    loss_sum += double(model.forward(inputs.data(), targets.data(), count, seq)) * count;
    // Exact integers divided once: with even shares this is exactly 1.0f / accum.
    const float scale = float(size_t(count) * ranks) / float(global_batch);
    if (micro + 1 < parts) {
      auto local_only = ddp.no_sync();
      model.backward(scale, nullptr);
    } else {
      model.backward(scale, [&ddp](size_t param) { ddp.mark_grad_ready(param); });
    }
  }
  ddp.finish();
  return loss_sum / double(n);
}

}  // namespace kolo::train

// One optimizer step's forward and backward passes on this rank, with DDP: `accum` micro-batches
// of `batch` windows each. The first accum-1 run under DDP's no_sync (gradients add up locally,
// nothing is sent); the last one marks every parameter ready as backward finalises it, so each
// bucket's all-reduce starts while backward still works on earlier layers. Each micro-batch's
// loss is scaled by 1/accum, so after ddp.finish() the gradients are those of the mean loss over
// the whole global batch, on every rank (on its shard, with ShardedDataParallel).
#pragma once
#include <string>
#include <vector>

#include "corpus.hpp"
#include "kolo/ddp.hpp"
#include "kolo/error.hpp"
#include "kolo/sharded_ddp.hpp"

namespace kolo::train {

// Zeroes the gradients, runs the micro-steps on `samples` (batch*accum window indices) and
// ddp.finish(). Returns this rank's loss, the mean over its samples. Model: gpt::Model<float>
// or gpt::CudaModel (the same forward, backward and zero_grad). Reducer: DistributedDataParallel
// or ShardedDataParallel (the same marks, no_sync and finish).
template <class Model, class Reducer>
double forward_backward(Model& model, Reducer& ddp, const TokenWindows& windows, const std::vector<size_t>& samples,
                        int batch, int accum) {
  if (samples.size() != size_t(batch) * size_t(accum))
    throw InvalidArgument("forward_backward: " + std::to_string(samples.size()) + " samples for batch " +
                          std::to_string(batch) + " x accum " + std::to_string(accum));
  const int seq = model.config().seq;
  const float scale = 1.0f / static_cast<float>(accum);
  model.zero_grad();
  double loss_sum = 0;
  std::vector<int> inputs, targets;
  for (int micro = 0; micro < accum; ++micro) {
    inputs.clear();
    targets.clear();
    for (int i = 0; i < batch; ++i) windows.append(samples[size_t(micro) * size_t(batch) + size_t(i)], inputs, targets);
    loss_sum += model.forward(inputs.data(), targets.data(), batch, seq);
    if (micro + 1 < accum) {
      auto local_only = ddp.no_sync();
      model.backward(scale, nullptr);
    } else {
      model.backward(scale, [&ddp](size_t param) { ddp.mark_grad_ready(param); });
    }
  }
  ddp.finish();
  return loss_sum / accum;
}

}  // namespace kolo::train

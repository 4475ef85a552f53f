// One optimizer step's forward and backward passes on this rank, with DDP: `accum` micro-batches
// of `batch` windows each. The first accum-1 run under DDP's no_sync (gradients add up locally,
// nothing is sent); the last one marks every parameter ready as backward finalises it, so each
// bucket's all-reduce starts while backward still works on earlier layers. Each micro-batch's
// loss is scaled by 1/accum, so after ddp.finish() the gradients are those of the mean loss over
// the whole global batch, on every rank (on its shard, with ShardedDataParallel).
#pragma once
#include <vector>

#include "corpus.hpp"
#include "kolo/ddp.hpp"
#include "kolo/sharded_ddp.hpp"
#include "model/model.hpp"

namespace kolo::train {

// Zeroes the gradients, runs the micro-steps on `samples` (batch*accum window indices) and
// ddp.finish(). Returns this rank's loss, the mean over its samples. Reducer:
// DistributedDataParallel or ShardedDataParallel (the same marks, no_sync and finish).
template <class Reducer>
double forward_backward(gpt::Model<float>& model, Reducer& ddp, const TokenWindows& windows,
                        const std::vector<size_t>& samples, int batch, int accum);

}  // namespace kolo::train

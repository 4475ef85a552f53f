// Numbers that need every rank: the validation loss (each rank evaluates a strided share of a
// fixed set of validation windows) and the mean of a per-rank value. Collective: every rank calls
// them at the same point.
#pragma once
#include "corpus.hpp"
#include "kolo/process_group.hpp"
#include "model/model.hpp"

namespace kolo::train {

// Mean loss over the first min(samples, windows.count()) validation windows, independent of the
// number of ranks (rank r takes windows r, r+K, ...; sums are all-reduced), in batches of `batch`.
double validation_loss(gpt::Model<float>& model, ProcessGroup& group, const TokenWindows& windows, int samples,
                       int batch);

// The mean over all ranks' samples of a per-sample mean: `value` is this rank's mean over its
// `count` samples, `total` the samples over all ranks (shares may differ, kolo-train --elastic).
double mean_over_samples(ProcessGroup& group, double value, size_t count, size_t total);

// The smallest `value` over all ranks.
double min_over_ranks(ProcessGroup& group, double value);

}  // namespace kolo::train

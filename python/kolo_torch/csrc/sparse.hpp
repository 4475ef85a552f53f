// All-reduce (SUM) of a sparse COO tensor, as ProcessGroupGloo does it: every rank's coalesced
// indices and values are gathered, and the sum is built from them in rank order
// (sparse_coo_tensor(rank 0's) += each other rank's), so kolo and gloo give the same tensor.
// DDP relies on it for nn.Embedding(sparse=True) gradients.
//
// It runs at issue, on the calling thread: up to three kolo all-gathers (one when no rank has
// entries), each waited for before the next (the sizes of the second and third come from the
// first). The Work returned is complete.
#pragma once
#include <ATen/ATen.h>

#include "kolo/options.hpp"
#include "kolo/process_group.hpp"

namespace kolo_torch {

// The sum over the group of the sparse COO tensor `t` (every rank's must have the same sizes,
// sparse and dense dimensions: checked, naming the rank that differs). `timeout`: per gather.
at::Tensor sparse_allreduce(kolo::ProcessGroup& pg, const at::Tensor& t, kolo::Milliseconds timeout);

}  // namespace kolo_torch

// The reduction step shared by the "direct" algorithms: one block per rank, combined strictly
// in rank order so the result does not depend on which message arrived first.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/comm.hpp"

namespace kolo::algo {

// dst = finalize(((blocks[0] op blocks[1]) op blocks[2]) ... op blocks[n-1]), each of `count`
// elements. blocks[i] may be read once arrivals[i] has completed (an invalid Req means it is
// already there). dst may be the very memory of one block (in-place); when the running result
// would overwrite that block before its turn, the block is first saved in `spare` (count
// elements of scratch).
void reduce_in_rank_order(Comm& comm, void* dst, std::span<const void*> blocks, std::span<Req> arrivals,
                          size_t count, void* spare);

// The same result (bit for bit: every element sees the same operations in the same order), for
// blocks that have all arrived, computed tile by tile: each tile of `tile` elements of dst
// takes all n-1 operations while it stays in the cache, so the running result is written to
// memory once instead of n-1 times (a large reduce-scatter's blocks are far bigger than the
// cache). dst may be the memory of one block (in-place): each tile of it is first saved in
// `spare` (tile elements of scratch) when the running result would overwrite it before its
// turn. Finalizes each tile, as reduce_in_rank_order does the whole.
void reduce_arrived_in_tiles(Comm& comm, void* dst, std::span<const void*> blocks, size_t count, size_t tile,
                             void* spare);

}  // namespace kolo::algo

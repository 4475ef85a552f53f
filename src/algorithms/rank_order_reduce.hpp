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

}  // namespace kolo::algo

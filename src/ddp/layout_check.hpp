// Internal: the collective check that every rank of a group describes the same parameter layout.
#pragma once
#include <cstddef>
#include <vector>

#include "kolo/ddp.hpp"

namespace kolo::ddp {

// Collective over `group`. Returns when every rank passed the same layout, total, bucket sizes
// compression and `sharded` (whatever decides which collectives run); otherwise every rank throws the
// same MismatchError, naming the first difference between rank 0 and the lowest rank that
// disagrees with it, and listing every rank that disagrees. Collectives use opts.timeout.
void check_same_layout(ProcessGroup& group, const std::vector<DdpParam>& layout, size_t total,
                       const DdpOptions& opts, bool sharded);

}  // namespace kolo::ddp

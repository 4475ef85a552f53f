// What a group formed anew from a running one (shrunk to its survivors, or grown by joiners)
// must compute, element by element: all-reduce, broadcast from both ends and all-gather of int32
// at 1,000 and 200,000 elements. Shared by the shrink and grow scenarios.
#pragma once
#include <string>

#include "kolo/process_group.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {

// `how` ("shrunk", "grown") names the group in the case names.
void check_reformed_group(WorkerContext& ctx, ProcessGroup& g, const std::string& how);

}  // namespace kolo::coltest

// What kolo-perf knows about each collective (name, nccl-tests' buffer shapes and bus bandwidth
// factor): the table in bench/common, shared with the peer benchmarks.
#pragma once
#include "collective_specs.hpp"

namespace kolo::perf {

using bench::CollectiveSpec;
using bench::CollId;
using bench::collective_names;
using bench::find_collective;
using bench::Shape;

}  // namespace kolo::perf

// The whole benchmark over a PeerBackend: every type x operator x size, out-of-place then
// in-place, each timed, combined across ranks and (with -c 1) checked; rank 0 prints the table.
#pragma once
#include "peer_backend.hpp"
#include "peer_options.hpp"
#include "usage_error.hpp"

namespace kolo::peers {

using bench::kExitError;
using bench::kExitOk;
using bench::kExitUsage;
using bench::kExitTestFailure;

// Collective: every rank calls it with the same options. Prints the table on rank 0 (and
// writes --json/--csv there) and returns kExitOk or kExitTestFailure (7: wrong results or below the floor);
// throws UsageError for a root outside the group.
int run_benchmark(PeerBackend& backend, const PeerOptions& o, const char* program);

}  // namespace kolo::peers

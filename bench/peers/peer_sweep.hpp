// The whole benchmark over a PeerBackend: every type x operator x size, out-of-place then
// in-place, each timed, combined across ranks and (with -c 1) checked; rank 0 prints the table.
#pragma once
#include "peer_backend.hpp"
#include "peer_options.hpp"

namespace kolo::peers {

constexpr int kExitOk = 0;
constexpr int kExitWrongResults = 1;
constexpr int kExitUsage = 2;
constexpr int kExitError = 3;

// Collective: every rank calls it with the same options. Returns kExitOk or kExitWrongResults;
// throws UsageError for a root outside the group.
int run_benchmark(PeerBackend& backend, const PeerOptions& o, const char* program);

}  // namespace kolo::peers

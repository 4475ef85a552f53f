// A bad command line. Every benchmark program prints it with its usage text and exits with
// kExitUsage (2), before touching the network.
#pragma once
#include <stdexcept>

namespace kolo::bench {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The exit statuses every benchmark program shares (kolo-perf, kolo-perf-mpi, kolo-perf-gloo).
constexpr int kExitOk = 0;
constexpr int kExitWrongResults = 1;   // at least one wrong element (-c 1)
constexpr int kExitUsage = 2;          // bad command line
constexpr int kExitError = 3;          // the library under test failed
constexpr int kExitBelowMinBw = 4;     // average busbw below --min-bw / KOLO_PERF_MIN_BW

}  // namespace kolo::bench

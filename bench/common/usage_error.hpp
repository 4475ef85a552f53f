// A bad command line. Every benchmark program prints it with its usage text and exits with
// kExitUsage (2), before touching the network.
#pragma once
#include <stdexcept>

namespace kolo::bench {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The exit statuses every benchmark program shares (kolo-perf, kolo-perf-mpi, kolo-perf-gloo),
// nccl-tests' where it has one (its testResult_t), so scripts that test for 7 keep working.
constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;          // bad command line (nccl-tests prints its usage and exits 0)
constexpr int kExitError = 3;          // the library under test failed (nccl-tests' testNcclError)
constexpr int kExitTestFailure = 7;    // nccl-tests' testNumResults: a wrong element (-c), or the
                                       // average busbw below 0.9 x --min-bw / NCCL_TESTS_MIN_BW

}  // namespace kolo::bench

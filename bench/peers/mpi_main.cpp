// kolo-perf-mpi: kolo-perf's table for MPI's collectives, to compare kolo with Open MPI on the
// same machine and the same sizes.
//   mpirun --allow-run-as-root --oversubscribe -np 4 kolo-perf-mpi allreduce -b 8 -e 16M -f 4
// Exit status: 0 ok, 1 wrong results, 2 bad command line, 3 MPI error (after MPI_Abort).
#include <mpi.h>

#include <cstdio>
#include <exception>

#include "mpi_backend.hpp"
#include "peer_sweep.hpp"

namespace {

const kolo::peers::ProgramTraits kTraits{
    "kolo-perf-mpi",
    {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather", "scatter", "sendrecv"},
    {},
    false,
    false,
};

// Prints the error and ends the whole job: MPI has no timeout, so peers left inside a
// collective would otherwise wait forever.
int abort_job(int rank, const char* what, int code) {
  std::fprintf(stderr, "kolo-perf-mpi: rank %d: %s\n", rank, what);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kolo::peers;
  PeerOptions o;
  try {
    o = parse_options(argc, argv, kTraits);
  } catch (const UsageError& e) {
    // Every rank parses the same arguments and fails alike: no MPI_Init, no abort needed.
    std::fprintf(stderr, "kolo-perf-mpi: %s\n\n%s", e.what(), usage_text(kTraits).c_str());
    return kExitUsage;
  }
  if (o.version) {
    std::printf("%s\n", kolo::bench::version_line(argv[0]).c_str());
    return 0;
  }
  if (o.help) {
    std::printf("%s", usage_text(kTraits).c_str());
    return kExitOk;
  }
  MPI_Init(&argc, &argv);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = kExitOk;
  try {
    MpiBackend backend;
    status = run_benchmark(backend, o, kTraits.name);
  } catch (const UsageError& e) {
    return abort_job(rank, e.what(), kExitUsage);
  } catch (const std::exception& e) {
    return abort_job(rank, e.what(), kExitError);
  }
  MPI_Finalize();
  return status;
}

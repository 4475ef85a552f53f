// kolo-perf-mpi: kolo-perf's table for MPI's collectives, to compare kolo with Open MPI on the
// same machine and the same sizes.
//   mpirun --allow-run-as-root --oversubscribe -np 4 kolo-perf-mpi allreduce -b 8 -e 16M -f 4
// Exit status: 0 ok, 1 wrong results, 2 bad command line, 3 MPI error (after MPI_Abort).
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

#include "harness.hpp"
#include "mpi_backend.hpp"
#include "peer_options.hpp"

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
  // Every rank parses the same arguments and fails alike: no MPI_Init, no abort needed.
  if (const int done = parse_command_line(argc, argv, kTraits, o); done >= 0) return done;
  MPI_Init(&argc, &argv);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = kExitOk;
  try {
    MpiBackend backend;
    status = kolo::bench::run_benchmark(backend, o, kTraits.name, std::string("[") + kTraits.name + "]");
  } catch (const UsageError& e) {
    return abort_job(rank, e.what(), kExitUsage);
  } catch (const std::exception& e) {
    return abort_job(rank, e.what(), kExitError);
  }
  MPI_Finalize();
  return status;
}

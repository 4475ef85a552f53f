// Runs one matrix case on a group and checks every output element (and the guard zones, and
// that out-of-place inputs were left untouched) against the reference. Errors from kolo
// propagate: a case that throws ends the worker.
#pragma once
#include <cstdint>

#include "check_log.hpp"
#include "kolo/process_group.hpp"
#include "matrix_cases.hpp"

namespace kolo::coltest {

void run_reduction_case(ProcessGroup& group, const MatrixCase& c, CheckLog& log);
void run_movement_case(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log);
void run_alltoallv_case(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log);
void run_sendrecv_case(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log);
void run_barrier_case(ProcessGroup& group, const MatrixCase& c, CheckLog& log);

// The one of the above that runs `c` (the salt varies the data of cases that take one).
inline void run_matrix_case(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log) {
  switch (c.coll) {
    case Coll::allreduce:
    case Coll::reduce:
    case Coll::reduce_scatter: run_reduction_case(group, c, log); break;
    case Coll::alltoallv: run_alltoallv_case(group, c, salt, log); break;
    case Coll::sendrecv: run_sendrecv_case(group, c, salt, log); break;
    case Coll::barrier: run_barrier_case(group, c, log); break;
    default: run_movement_case(group, c, salt, log); break;
  }
}

}  // namespace kolo::coltest

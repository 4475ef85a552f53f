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

}  // namespace kolo::coltest

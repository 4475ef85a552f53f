// Scenario "matrix COLLECTIVE": every case of the correctness matrix for one collective at this
// world size (matrix_cases.cpp), run one after another in one group.
#include <stdexcept>

#include "matrix_run.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {

void scenario_matrix(WorkerContext& ctx) {
  if (ctx.args.empty()) throw std::invalid_argument("matrix needs a collective name");
  const Coll coll = parse_coll(ctx.args[0]);
  ProcessGroup& group = ctx.join();
  uint32_t salt = 0;
  for (const MatrixCase& c : matrix_cases(coll, group.size())) {
    ctx.log.begin_case(c.describe());
    ++salt;
    run_matrix_case(group, c, salt, ctx.log);
  }
  ctx.log.end_case();
}

}  // namespace kolo::coltest

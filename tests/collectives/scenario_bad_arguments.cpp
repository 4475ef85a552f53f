// Scenario "bad-arguments" (2 ranks): rank 0 makes calls with bad arguments, which must throw
// InvalidArgument from the call itself (not from wait) before any byte moves; rank 1 makes no
// such call. After each refused call both ranks run a checked allreduce: had the refused call
// sent anything or taken a sequence number, that allreduce would mismatch or hang.
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

void expect_refused(ProcessGroup& g, CheckLog& log, const std::string& what, const std::function<WorkPtr()>& call) {
  log.begin_case("refused: " + what);
  if (g.rank() == 0) {
    try {
      WorkPtr w = call();
      log.expect(false, "the call returned a Work instead of throwing InvalidArgument");
      // Do not leave it pending forever: its failure (or completion) ends here.
      try {
        w->wait(std::chrono::milliseconds(2000));
      } catch (const std::exception&) {
      }
      throw std::runtime_error("a bad call was accepted; the group can no longer be trusted");
    } catch (const InvalidArgument& e) {
      log.expect(std::string(e.what()).size() > 10, "InvalidArgument with no explanation");
    }
  }
  // Still usable afterwards, on both ranks: a checked allreduce.
  std::vector<int32_t> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (g.rank() + 1) * static_cast<int32_t>(i);
  g.allreduce(Buffer(v.data(), v.size()))->wait();
  const long double ranks_sum = static_cast<long double>(g.size()) * (g.size() + 1) / 2;
  log.expect_elements("allreduce after the refused call", DataType::int32, v.data(), v.size(),
                      [&](size_t i) { return ranks_sum * static_cast<long double>(i); });
}

}  // namespace

void scenario_bad_arguments(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  CheckLog& log = ctx.log;
  std::vector<float> floats(16, 1.0f);
  std::vector<float> other(16 * 8, 0.0f);
  std::vector<int32_t> ints(16, 1);
  const int n = g.size();

  expect_refused(g, log, "null buffer with count 10", [&] {
    return g.allreduce(Buffer(nullptr, 10, DataType::float32), Buffer(floats.data(), 10));
  });
  expect_refused(g, log, "broadcast root == size", [&] {
    BroadcastOptions o;
    o.root = n;
    return g.broadcast(Buffer(floats.data(), floats.size()), o);
  });
  expect_refused(g, log, "reduce root -1", [&] {
    ReduceOptions o;
    o.root = -1;
    return g.reduce(Buffer(floats.data(), 4), Buffer(other.data(), 4), o);
  });
  expect_refused(g, log, "gather root out of range", [&] {
    GatherOptions o;
    o.root = n + 3;
    return g.gather(Buffer(floats.data(), 4), Buffer(other.data(), 4 * static_cast<size_t>(n)), o);
  });
  expect_refused(g, log, "band on float32", [&] {
    AllreduceOptions o;
    o.op = ReduceKind::band;
    return g.allreduce(Buffer(floats.data(), floats.size()), o);
  });
  expect_refused(g, log, "bxor on float32 reduce_scatter", [&] {
    ReduceScatterOptions o;
    o.op = ReduceKind::bxor;
    return g.reduce_scatter(Buffer(other.data(), 4 * static_cast<size_t>(n)), Buffer(floats.data(), 4), o);
  });
  expect_refused(g, log, "count * element size overflows size_t", [&] {
    const size_t huge = std::numeric_limits<size_t>::max() / 2;
    return g.allreduce(Buffer(floats.data(), huge, DataType::float32), Buffer(other.data(), huge, DataType::float32));
  });
  expect_refused(g, log, "allgather count * size overflows", [&] {
    const size_t huge = std::numeric_limits<size_t>::max() / 3;
    return g.allgather(Buffer(floats.data(), huge, DataType::float32), Buffer(other.data(), huge, DataType::float32));
  });
  expect_refused(g, log, "alltoallv count vector of the wrong length", [&] {
    const std::vector<size_t> short_counts(1, 1), counts(static_cast<size_t>(n), 1), displs_ok(static_cast<size_t>(n), 0);
    std::vector<size_t> displs(static_cast<size_t>(n));
    for (size_t i = 0; i < displs.size(); ++i) displs[i] = i;
    return g.alltoallv(Buffer(floats.data(), floats.size()), short_counts, displs, Buffer(other.data(), other.size()),
                       counts, displs);
  });
  expect_refused(g, log, "send and receive dtypes differ", [&] {
    return g.allreduce(Buffer(floats.data(), 4), Buffer(ints.data(), 4));
  });
  expect_refused(g, log, "receive buffer too small for allgather", [&] {
    return g.allgather(Buffer(floats.data(), 8), Buffer(other.data(), 8 * static_cast<size_t>(n) - 1));
  });
  expect_refused(g, log, "send to itself", [&] { return g.send(Buffer(floats.data(), 4), g.rank()); });
  expect_refused(g, log, "receive from rank -2", [&] { return g.recv(Buffer(floats.data(), 4), -2); });
  expect_refused(g, log, "receive from any source into a null buffer with count 4",
                 [&] { return g.recv(Buffer(static_cast<float*>(nullptr), 4), kAnySource); });
  {
    // A group of one (every rank its own color) has nobody to receive from.
    std::shared_ptr<ProcessGroup> alone = g.split(g.rank(), 0);
    log.begin_case("refused: receive from any source in a group of 1");
    try {
      alone->recv(Buffer(floats.data(), 4), kAnySource);
      log.expect(false, "the call returned a Work instead of throwing InvalidArgument");
    } catch (const InvalidArgument& e) {
      log.expect(std::string(e.what()).find("any source") != std::string::npos, std::string("unclear refusal: ") + e.what());
    }
    alone->shutdown();
  }
  log.end_case();
}

}  // namespace kolo::coltest

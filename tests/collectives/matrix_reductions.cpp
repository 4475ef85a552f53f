// Matrix cases of allreduce, reduce and reduce_scatter.
#include <optional>

#include "guarded_buffer.hpp"
#include "matrix_run.hpp"
#include "reference.hpp"
#include "test_memory.hpp"

namespace kolo::coltest {
namespace {

void fill_inputs(GuardedBuffer& b, size_t count, const ReduceReference& ref, int rank) {
  for (size_t i = 0; i < count; ++i) store_element(b.dtype(), b.element(i), 0, ref.input(rank, i));
}

template <class Options>
Options options_for(const MatrixCase& c, const ReduceOp& op) {
  Options o;
  o.algorithm = c.algorithm;
  o.op = op;
  return o;
}

}  // namespace

void run_reduction_case(ProcessGroup& group, const MatrixCase& c, CheckLog& log) {
  const int world = group.size();
  const int rank = group.rank();
  const ReduceOp op = test_op(c.op, c.dtype);
  const size_t n = c.count;
  const auto N = static_cast<size_t>(world);
  const DataType t = c.dtype;
  const ReduceReference ref(t, op, world);

  if (c.coll == Coll::reduce_scatter) {
    // send holds count*world; in place the result is this rank's block of it.
    GuardedBuffer send(t, n * N);
    std::optional<GuardedBuffer> separate_recv;
    fill_inputs(send, n * N, ref, rank);
    if (!c.in_place) separate_recv.emplace(t, n);
    void* recv_ptr = c.in_place ? send.element(static_cast<size_t>(rank) * n) : separate_recv->data();
    Snapshot input(send.data(), c.in_place ? 0 : n * N * dtype_size(t));
    auto o = options_for<ReduceScatterOptions>(c, op);
    group.reduce_scatter(TestBuffer(send.data(), n * N, t), TestBuffer(recv_ptr, n, t), o)->synchronize();
    log.expect_elements("recv", t, recv_ptr, n,
                        [&](size_t i) { return ref.expected(static_cast<size_t>(rank) * n + i); });
    log.expect(send.guards_intact() && (!separate_recv || separate_recv->guards_intact()), "guard zone overwritten");
    log.expect(input.unchanged(), "out-of-place input was modified");
    return;
  }

  // allreduce and reduce: in place, one buffer.
  GuardedBuffer send(t, n);
  fill_inputs(send, n, ref, rank);
  const bool receives = c.coll == Coll::allreduce || rank == c.root;
  std::optional<GuardedBuffer> separate_recv;
  if (!c.in_place && receives) separate_recv.emplace(t, n);
  Buffer recv = c.in_place ? TestBuffer(send.data(), n, t)
                           : (separate_recv ? TestBuffer(separate_recv->data(), n, t) : TestBuffer(nullptr, 0, t));
  Snapshot input(send.data(), c.in_place ? 0 : n * dtype_size(t));
  if (c.coll == Coll::allreduce) {
    group.allreduce(TestBuffer(send.data(), n, t), recv, options_for<AllreduceOptions>(c, op))->synchronize();
  } else {
    auto o = options_for<ReduceOptions>(c, op);
    o.root = c.root;
    group.reduce(TestBuffer(send.data(), n, t), recv, o)->synchronize();
  }
  if (receives)
    log.expect_elements("recv", t, recv.ptr, n, [&](size_t i) { return ref.expected(i); });
  log.expect(send.guards_intact() && (!separate_recv || separate_recv->guards_intact()), "guard zone overwritten");
  log.expect(input.unchanged(), "out-of-place input was modified");
}

}  // namespace kolo::coltest

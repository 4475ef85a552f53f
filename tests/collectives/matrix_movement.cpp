// Matrix cases of broadcast, allgather, gather, scatter and alltoall: rank r's input at index i
// is data_value(r, i); every output element must be the input it was copied from.
#include <optional>

#include "guarded_buffer.hpp"
#include "matrix_run.hpp"
#include "reference.hpp"
#include "test_memory.hpp"

namespace kolo::coltest {
namespace {

void fill(void* base, DataType t, size_t count, int rank, size_t index_base, uint32_t salt) {
  for (size_t i = 0; i < count; ++i) store_element(t, base, i, data_value(t, rank, index_base + i, salt));
}

void* offset(void* base, DataType t, size_t elements) { return static_cast<char*>(base) + elements * dtype_size(t); }

void run_broadcast(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log) {
  const DataType t = c.dtype;
  GuardedBuffer buf(t, c.count);
  if (group.rank() == c.root) fill(buf.data(), t, c.count, c.root, 0, salt);
  BroadcastOptions o;
  o.algorithm = c.algorithm;
  o.root = c.root;
  group.broadcast(TestBuffer(buf.data(), c.count, t), o)->synchronize();
  log.expect_elements("buffer", t, buf.data(), c.count, [&](size_t i) { return data_value(t, c.root, i, salt); });
  log.expect(buf.guards_intact(), "guard zone overwritten");
}

// allgather and gather: recv holds count*world; in place, this rank's input already sits in
// its own block of recv.
void run_gather_like(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log) {
  const DataType t = c.dtype;
  const int rank = group.rank();
  const size_t n = c.count;
  const size_t total = n * static_cast<size_t>(group.size());
  const bool receives = c.coll == Coll::allgather || rank == c.root;
  // Out of place, a non-root gather rank passes no receive buffer at all.
  std::optional<GuardedBuffer> recv;
  if (receives || c.in_place) recv.emplace(t, total);
  std::optional<GuardedBuffer> own_send;
  void* send_ptr;
  if (c.in_place) {
    send_ptr = offset(recv->data(), t, static_cast<size_t>(rank) * n);
  } else {
    own_send.emplace(t, n);
    send_ptr = own_send->data();
  }
  fill(send_ptr, t, n, rank, 0, salt);
  Snapshot input(send_ptr, c.in_place ? 0 : n * dtype_size(t));
  const Buffer send = TestBuffer(send_ptr, n, t);
  const Buffer recv_buffer = recv ? TestBuffer(recv->data(), total, t) : TestBuffer(nullptr, 0, t);
  if (c.coll == Coll::allgather) {
    AllgatherOptions o;
    o.algorithm = c.algorithm;
    group.allgather(send, recv_buffer, o)->synchronize();
  } else {
    GatherOptions o;
    o.algorithm = c.algorithm;
    o.root = c.root;
    group.gather(send, recv_buffer, o)->synchronize();
  }
  if (receives) {
    log.expect_elements("recv", t, recv->data(), total, [&](size_t i) {
      return data_value(t, static_cast<int>(i / n), i % n, salt);
    });
  }
  log.expect((!recv || recv->guards_intact()) && (!own_send || own_send->guards_intact()), "guard zone overwritten");
  log.expect(input.unchanged(), "out-of-place input was modified");
}

// scatter: the root's send holds count*world; in place, every rank's result is its own block
// of a count*world buffer.
void run_scatter(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log) {
  const DataType t = c.dtype;
  const int rank = group.rank();
  const size_t n = c.count;
  const size_t total = n * static_cast<size_t>(group.size());
  const bool sends = rank == c.root;
  std::optional<GuardedBuffer> send;
  if (sends || c.in_place) send.emplace(t, total);
  if (sends) fill(send->data(), t, total, c.root, 0, salt);
  std::optional<GuardedBuffer> own_recv;
  void* recv_ptr;
  if (c.in_place) {
    recv_ptr = offset(send->data(), t, static_cast<size_t>(rank) * n);
  } else {
    own_recv.emplace(t, n);
    recv_ptr = own_recv->data();
  }
  Snapshot input(sends ? send->data() : nullptr, (sends && !c.in_place) ? total * dtype_size(t) : 0);
  ScatterOptions o;
  o.algorithm = c.algorithm;
  o.root = c.root;
  const Buffer send_buffer = send ? TestBuffer(send->data(), total, t) : TestBuffer(nullptr, 0, t);
  group.scatter(send_buffer, TestBuffer(recv_ptr, n, t), o)->synchronize();
  log.expect_elements("recv", t, recv_ptr, n,
                      [&](size_t i) { return data_value(t, c.root, static_cast<size_t>(rank) * n + i, salt); });
  log.expect((!send || send->guards_intact()) && (!own_recv || own_recv->guards_intact()), "guard zone overwritten");
  log.expect(input.unchanged(), "out-of-place input was modified");
}

// alltoall: block b of rank r's send goes to rank b, which stores it as its block r.
void run_alltoall(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log) {
  const DataType t = c.dtype;
  const int rank = group.rank();
  const size_t n = c.count;
  const size_t total = n * static_cast<size_t>(group.size());
  GuardedBuffer send(t, total);
  fill(send.data(), t, total, rank, 0, salt);
  std::optional<GuardedBuffer> own_recv;
  if (!c.in_place) own_recv.emplace(t, total);
  void* recv_ptr = c.in_place ? send.data() : own_recv->data();
  Snapshot input(send.data(), c.in_place ? 0 : total * dtype_size(t));
  AllToAllOptions o;
  o.algorithm = c.algorithm;
  group.alltoall(TestBuffer(send.data(), total, t), TestBuffer(recv_ptr, total, t), o)->synchronize();
  log.expect_elements("recv", t, recv_ptr, total, [&](size_t i) {
    return data_value(t, static_cast<int>(i / n), static_cast<size_t>(rank) * n + i % n, salt);
  });
  log.expect(send.guards_intact() && (!own_recv || own_recv->guards_intact()), "guard zone overwritten");
  log.expect(input.unchanged(), "out-of-place input was modified");
}

}  // namespace

void run_movement_case(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log) {
  switch (c.coll) {
    case Coll::broadcast: return run_broadcast(group, c, salt, log);
    case Coll::allgather:
    case Coll::gather: return run_gather_like(group, c, salt, log);
    case Coll::scatter: return run_scatter(group, c, salt, log);
    case Coll::alltoall: return run_alltoall(group, c, salt, log);
    default: log.expect(false, "not a data movement collective");
  }
}

}  // namespace kolo::coltest

// Scenario "inflight": ten different collectives issued back to back without waiting, then
// waited for in reverse order. Proves that queued operations run correctly while others are
// pending, that sequence numbers follow issue order, and that on_complete callbacks run in
// issue order (operations on a group complete in issue order).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "guarded_buffer.hpp"
#include "reference.hpp"
#include "worker_context.hpp"

namespace kolo::coltest {
namespace {

struct Pending {
  std::string name;
  WorkPtr work;
  std::function<void(CheckLog&)> check;
};

// Owns the buffers of every pending operation until the checks ran.
struct Arena {
  std::vector<std::unique_ptr<GuardedBuffer>> buffers;
  GuardedBuffer& make(DataType t, size_t count) {
    buffers.push_back(std::make_unique<GuardedBuffer>(t, count));
    return *buffers.back();
  }
};

void fill_data(GuardedBuffer& b, int rank, uint32_t salt, size_t index_base = 0) {
  for (size_t i = 0; i < b.count(); ++i) store_element(b.dtype(), b.element(i), 0, data_value(b.dtype(), rank, index_base + i, salt));
}

void fill_reduce(GuardedBuffer& b, const ReduceOp& op, int world, int rank) {
  for (size_t i = 0; i < b.count(); ++i) store_element(b.dtype(), b.element(i), 0, reduce_input(b.dtype(), op, world, rank, i));
}

}  // namespace

void scenario_inflight(WorkerContext& ctx) {
  ProcessGroup& g = ctx.join();
  const int n = g.size();
  const int r = g.rank();
  const auto N = static_cast<size_t>(n);
  Arena arena;
  std::vector<Pending> ops;
  // Each callback is registered right after its issue and records the completion order. The
  // state is shared with the callbacks: a callback runs on the engine thread just after its
  // operation completes, which may be after wait() has returned.
  struct Completions {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<size_t> order;
  };
  const auto completions = std::make_shared<Completions>();
  const auto record = [&ops, completions](Pending p) {
    const size_t index = ops.size();
    p.work->on_complete([completions, index](Work&) {
      std::lock_guard<std::mutex> lock(completions->mu);
      completions->order.push_back(index);
      completions->cv.notify_all();
    });
    ops.push_back(std::move(p));
  };

  {  // 0: allreduce sum, float32
    const ReduceOp op = ReduceKind::sum;
    auto& buf = arena.make(DataType::float32, 1001);
    fill_reduce(buf, op, n, r);
    record({"allreduce", g.allreduce(Buffer(buf.data(), buf.count(), buf.dtype())), [&buf, op, n](CheckLog& log) {
                     log.expect_elements("allreduce", buf.dtype(), buf.data(), buf.count(),
                                         [&](size_t i) { return reduce_expected(buf.dtype(), op, n, i); });
                   }});
  }
  {  // 1: broadcast from the last rank, int32
    auto& buf = arena.make(DataType::int32, 77);
    if (r == n - 1) fill_data(buf, r, 1);
    BroadcastOptions o;
    o.root = n - 1;
    record({"broadcast", g.broadcast(Buffer(buf.data(), buf.count(), buf.dtype()), o), [&buf, n](CheckLog& log) {
                     log.expect_elements("broadcast", buf.dtype(), buf.data(), buf.count(),
                                         [&](size_t i) { return data_value(buf.dtype(), n - 1, i, 1); });
                   }});
  }
  {  // 2: allgather, uint8
    auto& send = arena.make(DataType::uint8, 33);
    auto& recv = arena.make(DataType::uint8, 33 * N);
    fill_data(send, r, 2);
    record({"allgather",
                   g.allgather(Buffer(send.data(), 33, DataType::uint8), Buffer(recv.data(), recv.count(), DataType::uint8)),
                   [&recv](CheckLog& log) {
                     log.expect_elements("allgather", recv.dtype(), recv.data(), recv.count(), [&](size_t i) {
                       return data_value(recv.dtype(), static_cast<int>(i / 33), i % 33, 2);
                     });
                   }});
  }
  {  // 3: reduce_scatter max, int64, 5 per rank
    const ReduceOp op = ReduceKind::max;
    auto& send = arena.make(DataType::int64, 5 * N);
    auto& recv = arena.make(DataType::int64, 5);
    fill_reduce(send, op, n, r);
    ReduceScatterOptions o;
    o.op = op;
    record({"reduce_scatter",
                   g.reduce_scatter(Buffer(send.data(), send.count(), DataType::int64), Buffer(recv.data(), 5, DataType::int64), o),
                   [&recv, op, n, r](CheckLog& log) {
                     log.expect_elements("reduce_scatter", recv.dtype(), recv.data(), 5, [&](size_t i) {
                       return reduce_expected(recv.dtype(), op, n, static_cast<size_t>(r) * 5 + i);
                     });
                   }});
  }
  {  // 4: alltoall, float64, 3 per peer
    auto& send = arena.make(DataType::float64, 3 * N);
    auto& recv = arena.make(DataType::float64, 3 * N);
    fill_data(send, r, 4);
    record({"alltoall",
                   g.alltoall(Buffer(send.data(), send.count(), DataType::float64), Buffer(recv.data(), recv.count(), DataType::float64)),
                   [&recv, r](CheckLog& log) {
                     log.expect_elements("alltoall", recv.dtype(), recv.data(), recv.count(), [&](size_t i) {
                       return data_value(recv.dtype(), static_cast<int>(i / 3), static_cast<size_t>(r) * 3 + i % 3, 4);
                     });
                   }});
  }
  {  // 5: reduce prod to rank 0, float16
    const ReduceOp op = ReduceKind::prod;
    auto& send = arena.make(DataType::float16, 9);
    auto& recv = arena.make(DataType::float16, 9);
    fill_reduce(send, op, n, r);
    ReduceOptions o;
    o.op = op;
    o.root = 0;
    record({"reduce",
                   g.reduce(Buffer(send.data(), 9, DataType::float16), Buffer(recv.data(), 9, DataType::float16), o),
                   [&recv, op, n, r](CheckLog& log) {
                     if (r != 0) return;
                     log.expect_elements("reduce", recv.dtype(), recv.data(), 9,
                                         [&](size_t i) { return reduce_expected(recv.dtype(), op, n, i); });
                   }});
  }
  {  // 6: gather to rank 1 % n, bfloat16
    const int root = 1 % n;
    auto& send = arena.make(DataType::bfloat16, 17);
    auto& recv = arena.make(DataType::bfloat16, 17 * N);
    fill_data(send, r, 6);
    GatherOptions o;
    o.root = root;
    record({"gather",
                   g.gather(Buffer(send.data(), 17, DataType::bfloat16), Buffer(recv.data(), recv.count(), DataType::bfloat16), o),
                   [&recv, r, root](CheckLog& log) {
                     if (r != root) return;
                     log.expect_elements("gather", recv.dtype(), recv.data(), recv.count(), [&](size_t i) {
                       return data_value(recv.dtype(), static_cast<int>(i / 17), i % 17, 6);
                     });
                   }});
  }
  {  // 7: scatter from rank 0, uint32
    auto& send = arena.make(DataType::uint32, 11 * N);
    auto& recv = arena.make(DataType::uint32, 11);
    if (r == 0) fill_data(send, 0, 7);
    record({"scatter",
                   g.scatter(Buffer(send.data(), send.count(), DataType::uint32), Buffer(recv.data(), 11, DataType::uint32)),
                   [&recv, r](CheckLog& log) {
                     log.expect_elements("scatter", recv.dtype(), recv.data(), 11, [&](size_t i) {
                       return data_value(recv.dtype(), 0, static_cast<size_t>(r) * 11 + i, 7);
                     });
                   }});
  }
  // 8: barrier
  record({"barrier", g.barrier(), [](CheckLog&) {}});
  {  // 9: alltoallv, int8: rank r sends r+j+1 elements to rank j, contiguously
    std::vector<size_t> send_counts(N), send_displs(N), recv_counts(N), recv_displs(N);
    size_t send_total = 0, recv_total = 0;
    for (int j = 0; j < n; ++j) {
      send_counts[j] = static_cast<size_t>(r + j + 1);
      send_displs[j] = send_total;
      send_total += send_counts[j];
      recv_counts[j] = static_cast<size_t>(j + r + 1);
      recv_displs[j] = recv_total;
      recv_total += recv_counts[j];
    }
    auto& send = arena.make(DataType::int8, send_total);
    auto& recv = arena.make(DataType::int8, recv_total);
    for (int j = 0; j < n; ++j)
      for (size_t k = 0; k < send_counts[j]; ++k)
        store_element(DataType::int8, send.element(send_displs[j] + k), 0, data_value(DataType::int8, r, 1000 * static_cast<size_t>(j) + k, 9));
    record({"alltoallv",
                   g.alltoallv(Buffer(send.data(), send_total, DataType::int8), send_counts, send_displs,
                               Buffer(recv.data(), recv_total, DataType::int8), recv_counts, recv_displs),
                   [&recv, recv_counts, recv_displs, n, r](CheckLog& log) {
                     for (int j = 0; j < n; ++j)
                       log.expect_elements("alltoallv", DataType::int8, recv.element(recv_displs[j]), recv_counts[j], [&](size_t k) {
                         return data_value(DataType::int8, j, 1000 * static_cast<size_t>(r) + k, 9);
                       });
                   }});
  }

  for (size_t i = ops.size(); i-- > 0;) ops[i].work->wait();

  ctx.log.begin_case("inflight");
  for (size_t i = 1; i < ops.size(); ++i)
    ctx.log.expect(ops[i].work->seq() > ops[i - 1].work->seq(),
                   ops[i].name + " has sequence " + std::to_string(ops[i].work->seq()) + ", not after " +
                       ops[i - 1].name + "'s " + std::to_string(ops[i - 1].work->seq()));
  for (Pending& p : ops) {
    ctx.log.expect(p.work->is_success(), p.name + " did not succeed");
    p.check(ctx.log);
  }
  // Every callback must run, soon: wait for the last ones (bounded).
  std::unique_lock<std::mutex> lock(completions->mu);
  completions->cv.wait_for(lock, std::chrono::seconds(10), [&] { return completions->order.size() >= ops.size(); });
  const std::vector<size_t> completion_order = completions->order;
  lock.unlock();
  std::string order;
  for (size_t i : completion_order) order += std::to_string(i) + " ";
  ctx.log.expect(completion_order.size() == ops.size(), "callbacks ran " + std::to_string(completion_order.size()) + " times");
  for (size_t i = 0; i < completion_order.size(); ++i)
    ctx.log.expect(completion_order[i] == i, "callbacks ran in the order " + order + "instead of issue order");
  for (auto& b : arena.buffers) ctx.log.expect(b->guards_intact(), "guard zone overwritten");
  ctx.log.end_case();
}

}  // namespace kolo::coltest

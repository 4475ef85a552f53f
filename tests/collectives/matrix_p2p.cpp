// Matrix cases of alltoallv, send/recv and barrier.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "guarded_buffer.hpp"
#include "matrix_run.hpp"
#include "reference.hpp"
#include "test_memory.hpp"

namespace kolo::coltest {
namespace {

// How many elements rank `from` sends to rank `to` in an alltoallv of this scale: uneven,
// zero for some pairs, different in each direction.
size_t v_count(int from, int to, size_t scale) {
  return scale * static_cast<size_t>((from + 2 * to) % 3) / 2 + static_cast<size_t>((from + to) % 2);
}

// Index of element k of the block `from` sends to `to`, for data_value: unique per block.
size_t v_index(int to, size_t k) { return (static_cast<size_t>(to) << 24) + k; }

}  // namespace

void run_alltoallv_case(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log) {
  const DataType t = c.dtype;
  const int world = group.size();
  const int rank = group.rank();
  const auto N = static_cast<size_t>(world);
  // Send blocks in rank order with 2-element gaps; receive blocks in reverse rank order with
  // 3-element gaps, so displacements are neither contiguous nor ordered like the ranks.
  std::vector<size_t> send_counts(N), send_displs(N), recv_counts(N), recv_displs(N);
  size_t send_span = 0;
  for (int j = 0; j < world; ++j) {
    send_counts[j] = v_count(rank, j, c.count);
    send_displs[j] = send_span;
    send_span += send_counts[j] + 2;
  }
  size_t recv_span = 0;
  for (int j = world - 1; j >= 0; --j) {
    recv_counts[j] = v_count(j, rank, c.count);
    recv_displs[j] = recv_span;
    recv_span += recv_counts[j] + 3;
  }
  GuardedBuffer send(t, send_span);
  GuardedBuffer recv(t, recv_span);
  for (int j = 0; j < world; ++j) {
    for (size_t k = 0; k < send_counts[j]; ++k)
      store_element(t, send.element(send_displs[j] + k), 0, data_value(t, rank, v_index(j, k), salt));
  }
  Snapshot input(send.data(), send_span * dtype_size(t));
  AllToAllOptions o;
  o.algorithm = c.algorithm;
  group.alltoallv(TestBuffer(send.data(), send_span, t), send_counts, send_displs, TestBuffer(recv.data(), recv_span, t),
                  recv_counts, recv_displs, o)
      ->synchronize();
  for (int j = 0; j < world; ++j) {
    log.expect_elements(("block from rank " + std::to_string(j)).c_str(), t, recv.element(recv_displs[j]),
                        recv_counts[j], [&](size_t k) { return data_value(t, j, v_index(rank, k), salt); });
    // The 3 elements after each block are a gap nobody may write: still poison.
    for (size_t g = 0; g < 3; ++g) {
      const auto* byte = static_cast<const unsigned char*>(recv.element(recv_displs[j] + recv_counts[j] + g));
      bool poisoned = true;
      for (size_t b = 0; b < dtype_size(t); ++b) poisoned = poisoned && byte[b] == GuardedBuffer::kPoisonByte;
      log.expect(poisoned, "gap element after the block from rank " + std::to_string(j) + " was written");
    }
  }
  log.expect(send.guards_intact() && recv.guards_intact(), "guard zone overwritten");
  log.expect(input.unchanged(), "alltoallv input was modified");
}

// For each distance k = 1..world-1, every rank sends to rank+k and receives from rank-k, with
// tag k. Operations on a group run in issue order, so within each cycle of the shift one rank
// (the smallest) sends first and the others receive first: the cycle unwinds from there.
void run_sendrecv_case(ProcessGroup& group, const MatrixCase& c, uint32_t salt, CheckLog& log) {
  const DataType t = c.dtype;
  const int world = group.size();
  const int rank = group.rank();
  for (int k = 1; k < world; ++k) {
    const int to = (rank + k) % world;
    const int from = (rank - k + world) % world;
    const bool leads_cycle = rank < std::gcd(world, k);
    GuardedBuffer send(t, c.count);
    GuardedBuffer recv(t, c.count);
    for (size_t i = 0; i < c.count; ++i)
      store_element(t, send.element(i), 0, data_value(t, rank, i + static_cast<size_t>(k) * 7, salt));
    SendOptions so;
    so.algorithm = c.algorithm;
    so.tag = static_cast<uint32_t>(k);
    RecvOptions ro;
    ro.algorithm = c.algorithm;
    ro.tag = static_cast<uint32_t>(k);
    WorkPtr first, second;
    if (leads_cycle) {
      first = group.send(TestBuffer(send.data(), c.count, t), to, so);
      second = group.recv(TestBuffer(recv.data(), c.count, t), from, ro);
    } else {
      first = group.recv(TestBuffer(recv.data(), c.count, t), from, ro);
      second = group.send(TestBuffer(send.data(), c.count, t), to, so);
    }
    first->synchronize();
    second->synchronize();
    log.expect_elements(("recv from rank " + std::to_string(from)).c_str(), t, recv.data(), c.count,
                        [&](size_t i) { return data_value(t, from, i + static_cast<size_t>(k) * 7, salt); });
    log.expect(send.guards_intact() && recv.guards_intact(), "guard zone overwritten");
  }
}

namespace {

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for every process on the host
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

// A barrier is correct when no rank leaves it before the last one arrived. One rank per round
// arrives late; afterwards every rank compares its departure time with every arrival time
// (CLOCK_MONOTONIC is shared by the processes of one host).
void run_barrier_case(ProcessGroup& group, const MatrixCase& c, CheckLog& log) {
  const int world = group.size();
  const int rank = group.rank();
  for (int round = 0; round < 3; ++round) {
    const int late = (round * 3 + 1) % world;
    if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(40));
    int64_t arrival = monotonic_ns();
    BarrierOptions o;
    o.algorithm = c.algorithm;
    group.barrier(o)->synchronize();
    const int64_t departure = monotonic_ns();
    std::vector<int64_t> arrivals(static_cast<size_t>(world));
    group.allgather(Buffer(&arrival, 1), Buffer(arrivals.data(), arrivals.size()))->wait();
    const int64_t last_arrival = *std::max_element(arrivals.begin(), arrivals.end());
    log.expect(departure >= last_arrival, "round " + std::to_string(round) + ": left the barrier " +
                                              std::to_string((last_arrival - departure) / 1000) +
                                              " us before rank " + std::to_string(late) + " arrived");
  }
}

}  // namespace kolo::coltest

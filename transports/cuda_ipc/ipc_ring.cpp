// IpcComm's ring all-reduce (Algo::kRing, see ipc_comm.hpp): step 3 of a call, between the
// READY and DONE handshakes of ipc_comm.cpp.
//
// The schedule is ring_schedule.hpp's: P chunks cut as two-shot cuts its slices (starts at
// multiples of 16 bytes); rank r, left neighbour l = r - 1, right neighbour q = r + 1 (mod P),
// steps g = 0 .. 2 P - 3:
//   reduce-scatter, g = s < P - 1:  chunk c = r - 1 - s:  out_r[c] = in_r[c] + (s == 0 ? in_l[c] : out_l[c])
//   all-gather, g = P - 1 + t:      chunk c = r - t:      out_r[c] = out_l[c]
// Before step g > 0, r's stream waits for l's step g - 1 (the host sees l published it, the
// stream waits on l's event or flag for it: the mechanism two-shot uses for its one MID phase,
// one phase per step here); after step g < 2 P - 3, r signals its own. Each wait is the host
// flags' (bounded by the timeout, ended at once with PeerError when l failed or died).
//
// The sums: chunk c is reduced along the ring starting at rank c, ((in_c + in_{c+1}) + in_{c+2})
// + ... + in_{c-1}, rounded to the dtype after each addition, so its bits depend on c (not the
// rank order the other algorithms sum in); then the all-gather copies that one result into
// every rank's output, so every rank ends with the same bits.
//
// Why no bounce buffer, in place or not: waits chain, so when r starts step g, l finished
// g - 1, l's left neighbour g - 2, ..., and q (P - 1 hops to the left) finished g - P + 1. At
// its step g', q reads r's chunk r - g' (reduce-scatter; the input at g' = 0) or r + 1 - (g' -
// P + 1) (all-gather), always the value r wrote at step g' - 1 (or r's input chunk r at
// g' = 0). r overwrites a chunk q read in the reduce-scatter again only at step g' + P - 1 (the
// all-gather writes chunk r - t at t = g'), by which time q has finished g'; a chunk q reads in
// the all-gather is not written again. Chunk r of the input, which q reads at step 0, is
// written by r at step P - 1. So in place needs no copy: peers' reads never race r's writes.
// (tests/cuda_ipc/ring_schedule_test.cpp runs the schedule under random interleavings that
// obey only these waits, in and out of place.)
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"
#include "transports/cuda_ipc/ipc_comm.hpp"
#include "transports/cuda_ipc/ring_schedule.hpp"

namespace kolo::cuda_ipc {

void IpcComm::ring_all_reduce(const Mapped& m, size_t count, DataType dtype, cudaStream_t stream) {
  const size_t esize = element_size(dtype);
  const int P = world_;
  if (P == 1) {
    if (m.out[rank_] != m.in[rank_])
      check(cudaMemcpyAsync(m.out[rank_], m.in[rank_], count * esize, cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync (one-rank ring)");
    return;
  }
  const RingChunks chunks(count, P, 16 / esize);
  const int left = (rank_ + P - 1) % P;
  const int steps = ring_steps(P);
  void* mine_out[1] = {m.out[rank_]};
  for (int g = 0; g < steps; ++g) {
    if (g > 0) {
      // The left neighbour's step g - 1 wrote the chunk this step reads.
      flags_.wait(left, ring_step_phase(g - 1), seq_);
      gpu_wait(left, ring_step_phase(g - 1), stream);
    }
    const RingStep st = ring_step(rank_, P, g);
    const size_t b = chunks.begin(st.chunk), n = chunks.size(st.chunk);
    if (st.sum) {
      // Own input first, then the neighbour's partial sum: two operands, so the order within a
      // step does not change the bits (a + b == b + a); the order across steps is the ring's.
      const void* srcs[2] = {m.in[rank_], st.left_input ? m.in[left] : m.out[left]};
      launch_sum(dtype, mine_out, 1, srcs, 2, b, b + n, stream);
    } else if (n > 0) {
      check(cudaMemcpyAsync(m.out[rank_] + b * esize, m.out[left] + b * esize, n * esize, cudaMemcpyDeviceToDevice,
                            stream),
            "cudaMemcpyAsync (ring all-gather of the left neighbour's chunk)");
    }
    // Every step is signalled, even of an empty chunk (counts smaller than P): the right
    // neighbour waits for each, and the phases must stay in step across ranks.
    if (g + 1 < steps) signal(ring_step_phase(g), stream);
  }
}

}  // namespace kolo::cuda_ipc

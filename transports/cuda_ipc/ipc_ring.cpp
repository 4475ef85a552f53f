// IpcComm's ring all-reduce (Algo::kRing, see ipc_comm.hpp): step 3 of a call, between the
// READY and DONE handshakes of ipc_comm.cpp.
//
// The buffers are cut into P chunks as two-shot cuts its slices (starts at multiples of 16
// bytes). Rank r, left neighbour l = r - 1, right neighbour q = r + 1 (mod P), global steps
// g = 0 .. 2 P - 3:
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
// all-gather writes chunk r - t at t = g'), by which time q has finished g'; one q read in the
// all-gather, never again. Chunk r of the input, which q reads at step 0, is written by r at
// step P - 1. So in place needs no copy: the peers' reads never race this rank's writes.
#include <algorithm>
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"
#include "transports/cuda_ipc/ipc_comm.hpp"

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
  const size_t width = 16 / esize;
  const size_t per = (count + P - 1) / P;
  const size_t slice = (per + width - 1) / width * width;
  auto begin = [&](int c) { return std::min(count, static_cast<size_t>(c) * slice); };
  auto mod = [P](int x) { return ((x % P) + P) % P; };
  const int left = mod(rank_ - 1);
  const int steps = 2 * (P - 1);
  void* mine_out[1] = {m.out[rank_]};
  for (int g = 0; g < steps; ++g) {
    if (g > 0) {
      // The left neighbour's step g - 1 wrote the chunk this step reads.
      flags_.wait(left, ring_step_phase(g - 1), seq_);
      gpu_wait(left, ring_step_phase(g - 1), stream);
    }
    if (g < P - 1) {
      const int c = mod(rank_ - 1 - g);
      // Own input first, then the neighbour's partial sum: two operands, so the order within a
      // step does not change the bits (a + b == b + a); the order across steps is the ring's.
      const void* srcs[2] = {m.in[rank_], g == 0 ? m.in[left] : m.out[left]};
      launch_sum(dtype, mine_out, 1, srcs, 2, begin(c), begin(c + 1), stream);
    } else {
      const int c = mod(rank_ - (g - (P - 1)));
      const size_t off = begin(c) * esize, n = (begin(c + 1) - begin(c)) * esize;
      if (n > 0)
        check(cudaMemcpyAsync(m.out[rank_] + off, m.out[left] + off, n, cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync (ring all-gather of the left neighbour's chunk)");
    }
    // Every step is signalled, even of an empty chunk (counts smaller than P): the right
    // neighbour waits for each, and the phases must stay in step across ranks.
    if (g + 1 < steps) signal(ring_step_phase(g), stream);
  }
}

}  // namespace kolo::cuda_ipc

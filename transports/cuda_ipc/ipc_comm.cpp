// IpcComm: the all-reduce's choreography across processes (see ipc_comm.hpp).
//
// One call k on rank r, stream s (the host waits are on shared memory, the GPU waits on
// interprocess events; kernels never wait on anything):
//   1. look up (or export) in and out; write the call's descriptor; record READY on s;
//      publish READY=k.
//   2. for each peer p: wait until p published READY>=k, read p's descriptor (check the shape,
//      map p's buffers), make s wait on p's READY event.
//   3. one-shot: sum all inputs into out.
//      two-shot: sum slice r of all inputs into out's slice r; record MID, publish, wait for
//      every peer's MID as in 2; copy slice p from p's out, for every p != r.
//      two-shot-push: sum slice r of all inputs into slice r of every rank's out.
//   4. record DONE (I am done reading, or writing, your buffers); publish; wait for every peer's DONE as in 2:
//      when s gets past this, nobody reads r's buffers any more, so the caller may reuse them.
// Why each phase has its own event and why the host wait comes first: a stream waits on an
// event's latest record at the time of the wait call. The host wait guarantees the peer's
// record for call k was issued; and a peer cannot issue its record for call k+1 before this
// rank published DONE for call k, which comes after this rank's waits of call k were issued.
#include "transports/cuda_ipc/ipc_comm.hpp"

#include <algorithm>
#include "kolo/error.hpp"
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace kolo::cuda_ipc {

const char* algo_name(Algo a) {
  switch (a) {
    case Algo::kOneShot: return "one-shot";
    case Algo::kTwoShot: return "two-shot";
    case Algo::kTwoShotPush: return "two-shot-push";
  }
  return "?";
}

IpcComm::IpcComm(std::shared_ptr<Store> store, int rank, int world, Options opts)
    : store_(std::move(store)),
      rank_(rank),
      world_(world),
      opts_(std::move(opts)),
      flags_(*store_, opts_.prefix, rank, world, opts_.timeout),
      events_(opts_.host_ordered ? nullptr
                                 : std::make_unique<IpcEvents>(*store_, opts_.prefix, rank, world, opts_.timeout)),
      cache_(*store_, opts_.prefix, rank, flags_),
      mappings_(*store_, opts_.prefix) {}

IpcComm::~IpcComm() = default;

void IpcComm::handshake(Phase phase, cudaStream_t stream) {
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    flags_.wait(p, phase, seq_);
    if (events_) events_->wait(p, phase, stream);
  }
}

void IpcComm::signal(Phase phase, cudaStream_t stream) {
  if (opts_.host_ordered) {
    // The diagnostic mode: the phase is published only once this rank's work before it is
    // complete, so the peers need no GPU-side wait at all.
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (host-ordered mode)");
  } else {
    events_->record(phase, stream);
  }
  flags_.publish(phase, seq_);
}

void IpcComm::close_retired_mappings(int p, cudaStream_t stream) {
  const uint64_t n = flags_.retired_count(p);
  if (n == retired_seen_[p]) return;
  // Our earlier kernels may still read the buffer on the GPU: let them finish first. Rare
  // (a peer freed or re-exported a buffer), so a synchronization is affordable.
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (before closing a retired mapping)");
  if (n - retired_seen_[p] > static_cast<uint64_t>(kRetireRing)) {
    mappings_.close_peer(p);  // fell behind the ring: close all, the live ones reopen lazily
  } else {
    for (uint64_t i = retired_seen_[p]; i < n; ++i) mappings_.close(p, flags_.retired_at(p, i));
  }
  retired_seen_[p] = n;
}

void IpcComm::all_reduce(const void* in, void* out, size_t count, DataType dtype, Algo algo, cudaStream_t stream) {
  if (closed_) throw Error("cuda_ipc: all_reduce on a closed communicator");
  if (!allreduce_supports(dtype)) throw InvalidArgument("cuda_ipc: all-reduce sums float32, float16 and bfloat16 only");
  if (algo != Algo::kOneShot && algo != Algo::kTwoShot && algo != Algo::kTwoShotPush) throw InvalidArgument("cuda_ipc: unknown algorithm");
  if (algo == Algo::kOneShot && in == out && world_ > 1) {
    throw InvalidArgument("cuda_ipc: one-shot all-reduce cannot run in place (peers read the input it overwrites)");
  }
  const size_t esize = element_size(dtype);
  const size_t bytes = count * esize;

  // 1. Describe the call, then say the input is ready. The lookups may throw (not device
  // memory): before anything is published, so the sequence stays in step.
  RegistrationCache::Found fin{0, 0}, fout{0, 0};
  if (count > 0) {
    fin = cache_.lookup(in, bytes);
    fout = cache_.lookup(out, bytes);
  }
  ++seq_;
  CallDesc& mine = flags_.my_desc();
  mine = CallDesc{};
  mine.gen_in = fin.gen;
  mine.off_in = fin.offset;
  mine.gen_out = fout.gen;
  mine.off_out = fout.offset;
  mine.count = count;
  mine.dtype = static_cast<uint32_t>(dtype);
  mine.algo = static_cast<uint32_t>(algo);
  signal(kReady, stream);

  // 2. Every peer's input, mapped here, once its READY for this call is enqueued.
  const void* ins[kMaxRanks] = {};
  char* outs[kMaxRanks] = {};
  ins[rank_] = in;
  outs[rank_] = static_cast<char*>(out);
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    flags_.wait(p, kReady, seq_);
    // Retirements p posted before this call's READY: closed before mapping what the call names,
    // so a recycled allocation is never taken for the stale mapping of its predecessor.
    close_retired_mappings(p, stream);
    const CallDesc d = flags_.desc(p);  // stable until p passes our DONE of this call
    if (d.count != count || d.dtype != mine.dtype || d.algo != mine.algo) {
      throw InvalidArgument("cuda_ipc: call " + std::to_string(seq_) + " differs across ranks: rank " +
                            std::to_string(rank_) + " has count " + std::to_string(count) + ", rank " +
                            std::to_string(p) + " has count " + std::to_string(d.count) + " (or another dtype or algorithm)");
    }
    if (count > 0) {
      ins[p] = mappings_.get(p, d.gen_in) + d.off_in;
      outs[p] = mappings_.get(p, d.gen_out) + d.off_out;
    }
    if (events_) events_->wait(p, kReady, stream);
  }

  // 3. The kernels.
  // Slices of the two-shot algorithms start at multiples of 16 bytes, so the vector path holds
  // for every slice.
  const size_t width = 16 / esize;
  const size_t per = (count + world_ - 1) / world_;
  const size_t slice = (per + width - 1) / width * width;
  auto begin = [&](int p) { return std::min(count, static_cast<size_t>(p) * slice); };
  void* mine_out[1] = {out};
  if (count > 0 && algo == Algo::kOneShot) {
    launch_sum(dtype, mine_out, 1, ins, world_, 0, count, stream);
  } else if (count > 0 && algo == Algo::kTwoShotPush) {
    // Every rank's output is free: each recorded READY after its earlier work on it, and no
    // one else writes slice rank_ of it.
    void* all_outs[kMaxRanks];
    for (int p = 0; p < world_; ++p) all_outs[p] = outs[p];
    launch_sum(dtype, all_outs, world_, ins, world_, begin(rank_), begin(rank_ + 1), stream);
    flags_.publish(kMid, seq_);  // no middle phase: keep the counter in step
  } else if (count > 0) {
    launch_sum(dtype, mine_out, 1, ins, world_, begin(rank_), begin(rank_ + 1), stream);
    signal(kMid, stream);
    handshake(kMid, stream);
    for (int p = 0; p < world_; ++p) {
      if (p == rank_ || begin(p + 1) == begin(p)) continue;
      const size_t off = begin(p) * esize;
      check(cudaMemcpyAsync(static_cast<char*>(out) + off, outs[p] + off, (begin(p + 1) - begin(p)) * esize,
                            cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync (all-gather of a peer's slice)");
    }
  } else {
    flags_.publish(kMid, seq_);  // keeps the phases in step for an empty call
  }

  // 4. Done reading the peers' buffers; the stream goes on once they are done with ours.
  signal(kDone, stream);
  handshake(kDone, stream);
}

void IpcComm::close() {
  if (closed_) return;
  closed_ = true;
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (close)");
  // Before the last handshake: retiring deletes store keys, and the store's host (rank 0)
  // may leave once everyone said goodbye.
  cache_.clear();
  ++seq_;
  flags_.publish(kBye, seq_);
  for (int p = 0; p < world_; ++p)
    if (p != rank_) flags_.wait(p, kBye, seq_);
  mappings_.close_all();
}

}  // namespace kolo::cuda_ipc

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
//      ring: 2 (P - 1) steps, each on one chunk of the left neighbour's buffers, a phase of
//      its own between steps (ipc_ring.cpp).
//   (the other collectives: one step here, the sums one kernel, the moves copies from the peers)
//   4. record DONE (I am done reading, or writing, your buffers); publish; wait for every peer's DONE as in 2:
//      when s gets past this, nobody reads r's buffers any more, so the caller may reuse them.
// Why each phase has its own event and why the host wait comes first: a stream waits on an
// event's latest record at the time of the wait call. The host wait guarantees the peer's
// record for call k was issued; and a peer cannot issue its record for call k+1 before this
// rank published DONE for call k, which comes after this rank's waits of call k were issued.
#include "transports/cuda_ipc/ipc_comm.hpp"

#include <algorithm>
#include <vector>
#include "kolo/error.hpp"
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"
#include "transports/cuda_ipc/cuda_memory.hpp"

namespace kolo::cuda_ipc {

namespace {

// Every rank's GPU, by its device's UUID through the store (the ordinal would not do: each
// process may see the GPUs in another order), numbered by the lowest rank on each: the same
// Placement on every rank.
Placement exchange_placement(Store& store, const std::string& prefix, int rank, int world,
                             std::chrono::milliseconds timeout) {
  if (world < 1 || world > kMaxRanks) {
    throw InvalidArgument("cuda_ipc: " + std::to_string(world) + " ranks (at most " + std::to_string(kMaxRanks) + ")");
  }
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  auto key = [&](int p) { return prefix + "/gpu_uuid/" + std::to_string(p); };
  store.set(key(rank), std::string(reinterpret_cast<const char*>(prop.uuid.bytes), sizeof(prop.uuid.bytes)));
  std::vector<std::string> keys;
  for (int p = 0; p < world; ++p) keys.push_back(key(p));
  store.wait(keys, timeout);
  Placement where;
  where.world = world;
  std::vector<std::string> seen;
  for (int p = 0; p < world; ++p) {
    const std::string id = store.get_string(key(p));
    const auto it = std::find(seen.begin(), seen.end(), id);
    where.gpu_of[p] = static_cast<int>(it - seen.begin());
    if (it == seen.end()) seen.push_back(id);
  }
  return where;
}

}  // namespace

IpcComm::IpcComm(std::shared_ptr<Store> store, int rank, int world, Options opts)
    : store_(std::move(store)),
      rank_(rank),
      world_(world),
      opts_(std::move(opts)),
      flags_(*store_, opts_.prefix, rank, world, opts_.timeout),
      events_(opts_.ordering == Options::Ordering::events
                  ? std::make_unique<IpcEvents>(*store_, opts_.prefix, rank, world, opts_.timeout)
                  : nullptr),
      gpu_flags_(opts_.ordering == Options::Ordering::flags ? std::make_unique<GpuFlags>(flags_, rank) : nullptr),
      cache_(*store_, opts_.prefix, rank, cuda_memory(), [this](uint64_t gen) { flags_.retire(gen); }),
      mappings_(*store_, opts_.prefix, cuda_memory()),
      placement_(exchange_placement(*store_, opts_.prefix, rank, world, opts_.timeout)) {
  if (opts_.stop_check) flags_.set_stop_check(opts_.stop_check);
}

IpcComm::~IpcComm() = default;

void IpcComm::handshake(Phase phase, cudaStream_t stream) {
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    flags_.wait(p, phase, seq_);
    gpu_wait(p, phase, stream);
  }
}

void IpcComm::gpu_wait(int p, Phase phase, cudaStream_t stream) {
  if (events_) events_->wait(p, phase, stream);
  if (gpu_flags_) gpu_flags_->wait(p, phase, seq_, stream);
}

void IpcComm::signal(Phase phase, cudaStream_t stream) {
  switch (opts_.ordering) {
    case Options::Ordering::events: events_->record(phase, stream); break;
    case Options::Ordering::flags: gpu_flags_->write(rank_, phase, seq_, stream); break;
    case Options::Ordering::host:
      // The phase is published only once this rank's work before it is complete, so the
      // peers need no GPU-side wait at all.
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (host-ordered mode)");
      break;
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

void IpcComm::check_open(const char* what) const {
  if (closed_) throw Error(std::string("cuda_ipc: ") + what + " on a closed communicator");
}

namespace {

const char* collective_name(uint32_t kind) {
  static const char* const kNames[] = {"?",          "all_reduce", "reduce_scatter", "all_gather",
                                       "broadcast",  "reduce",     "all_to_all",     "gather",
                                       "scatter",    "barrier",    "host_barrier"};
  return kind < sizeof(kNames) / sizeof(kNames[0]) ? kNames[kind] : "?";
}

void copy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream, const char* what) {
  if (bytes == 0 || dst == src) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), what);
}

// An all-reduce's algorithm by name (it may differ across ranks when KOLO_CUDA_IPC_ALGO or the
// cost model's settings do); "-" for the other collectives.
std::string algo_text(uint32_t algo) {
  return algo == 0 ? std::string("-") : std::string(algo_name(static_cast<Algo>(algo)));
}

void check_sums(DataType dtype, const char* what) {
  if (!allreduce_supports(dtype)) {
    throw InvalidArgument(std::string("cuda_ipc: ") + what + " sums float32, float16 and bfloat16 only");
  }
}

}  // namespace

IpcComm::Mapped IpcComm::begin_call(const Shape& shape, const void* in, size_t in_bytes, void* out, size_t out_bytes,
                                    cudaStream_t stream, bool bounce_in) {
  // 1. Describe the call, then say the input is ready. The lookups may throw (not device
  // memory): before anything is published, so the sequence stays in step. A buffer that cannot
  // be exported is replaced by a bounce buffer: the input copied in first, on the stream,
  // before READY is recorded; a shared output copied back after DONE (end_call).
  Mapped m;
  RegistrationCache::Found fin{0, 0}, fout{0, 0};
  const void* const user_in = in;
  if (in_bytes > 0) {
    fin = cache_.lookup(in, in_bytes);
    if (fin.gen == 0 || bounce_in) {
      void* b = bounce_in_.get(in_bytes);
      check(cudaMemcpyAsync(b, in, in_bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync (into the bounce buffer)");
      in = b;
      fin = cache_.lookup(b, in_bytes);
    }
  }
  if (out_bytes > 0) {
    if (out == user_in && in != user_in) {
      // In place on memory that cannot be exported: one bounce buffer is input and output.
      m.copy_back_to = out;
      m.copy_back_bytes = out_bytes;
      out = const_cast<void*>(in);
      fout = fin;
    } else {
      fout = cache_.lookup(out, out_bytes);
      if (fout.gen == 0) {
        m.copy_back_to = out;
        m.copy_back_bytes = out_bytes;
        out = bounce_out_.get(out_bytes);
        fout = cache_.lookup(out, out_bytes);
      }
    }
  }
  ++seq_;
  CallDesc& mine = flags_.my_desc();
  mine = CallDesc{};
  mine.gen_in = fin.gen;
  mine.off_in = fin.offset;
  mine.gen_out = fout.gen;
  mine.off_out = fout.offset;
  mine.count = shape.count;
  mine.dtype = static_cast<uint32_t>(shape.dtype);
  mine.algo = shape.algo;
  mine.kind = static_cast<uint32_t>(shape.kind);
  mine.root = shape.root;
  signal(kReady, stream);

  // 2. Every peer's shared buffers, mapped here, once its READY for this call is enqueued.
  m.in[rank_] = static_cast<const char*>(in);
  m.out[rank_] = static_cast<char*>(out);
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    flags_.wait(p, kReady, seq_);
    // Retirements p posted before this call's READY: closed before mapping what the call names,
    // so a recycled allocation is never taken for the stale mapping of its predecessor.
    close_retired_mappings(p, stream);
    const CallDesc d = flags_.desc(p);  // stable until p passes our DONE of this call
    if (d.count != mine.count || d.dtype != mine.dtype || d.algo != mine.algo || d.kind != mine.kind ||
        d.root != mine.root) {
      throw InvalidArgument("cuda_ipc: call " + std::to_string(seq_) + " differs across ranks: rank " +
                            std::to_string(rank_) + " calls " + collective_name(mine.kind) + " of " +
                            std::to_string(mine.count) + " (dtype " + std::to_string(mine.dtype) + ", algorithm " +
                            algo_text(mine.algo) + ", root " + std::to_string(mine.root) + "), rank " +
                            std::to_string(p) + " calls " + collective_name(d.kind) + " of " + std::to_string(d.count) +
                            " (dtype " + std::to_string(d.dtype) + ", algorithm " + algo_text(d.algo) + ", root " +
                            std::to_string(d.root) + ")");
    }
    if (d.gen_in != 0) m.in[p] = mappings_.get(p, d.gen_in) + d.off_in;
    if (d.gen_out != 0) m.out[p] = mappings_.get(p, d.gen_out) + d.off_out;
    gpu_wait(p, kReady, stream);
  }
  return m;
}

void IpcComm::end_call(const Mapped& m, cudaStream_t stream) {
  // 4. Done reading (or writing) the peers' buffers; the stream goes on once they are done with ours.
  signal(kDone, stream);
  handshake(kDone, stream);
  // After the peers' DONE: nobody writes the bounce buffer any more.
  copy_async(m.copy_back_to, m.out[rank_], m.copy_back_bytes, stream, "cudaMemcpyAsync (out of the bounce buffer)");
}

void IpcComm::all_reduce(const void* in, void* out, size_t count, DataType dtype, Algo algo, cudaStream_t stream) {
  check_open("all_reduce");
  check_sums(dtype, "all-reduce");
  if (algo != Algo::kOneShot && algo != Algo::kTwoShot && algo != Algo::kTwoShotPush && algo != Algo::kLeaderPush &&
      algo != Algo::kRing)
    throw InvalidArgument("cuda_ipc: unknown algorithm");
  const size_t esize = element_size(dtype);
  const size_t bytes = count * esize;
  // One-shot: peers only read this rank's input, so its output is not shared; in place, peers
  // would read the input this rank overwrites, so they read a copy of it.
  const bool one_shot = algo == Algo::kOneShot;
  const Mapped m = begin_call({Collective::all_reduce, static_cast<uint32_t>(algo), count, dtype, 0}, in, bytes, out,
                              one_shot ? 0 : bytes, stream, one_shot && in == out && world_ > 1);
  const void* const* ins = reinterpret_cast<const void* const*>(m.in);

  // 3. The kernels.
  // Slices of the two-shot algorithms start at multiples of 16 bytes, so the vector path holds
  // for every slice.
  const size_t width = 16 / esize;
  const size_t per = (count + world_ - 1) / world_;
  const size_t slice = (per + width - 1) / width * width;
  auto begin = [&](int p) { return std::min(count, static_cast<size_t>(p) * slice); };
  void* mine_out[1] = {m.out[rank_]};
  if (count > 0 && algo == Algo::kOneShot) {
    launch_sum(dtype, mine_out, 1, ins, world_, 0, count, stream);
  } else if (count > 0 && algo == Algo::kLeaderPush) {
    if (rank_ == 0) {
      void* all_outs[kMaxRanks];
      for (int p = 0; p < world_; ++p) all_outs[p] = m.out[p];
      launch_sum(dtype, all_outs, world_, ins, world_, 0, count, stream);
    }
  } else if (count > 0 && algo == Algo::kRing) {
    ring_all_reduce(m, count, dtype, stream);
  } else if (count > 0 && algo == Algo::kTwoShotPush) {
    // Every rank's output is free: each recorded READY after its earlier work on it, and no
    // one else writes slice rank_ of it.
    void* all_outs[kMaxRanks];
    for (int p = 0; p < world_; ++p) all_outs[p] = m.out[p];
    launch_sum(dtype, all_outs, world_, ins, world_, begin(rank_), begin(rank_ + 1), stream);
  } else if (count > 0) {
    launch_sum(dtype, mine_out, 1, ins, world_, begin(rank_), begin(rank_ + 1), stream);
    signal(kMid, stream);
    handshake(kMid, stream);
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      const size_t off = begin(p) * esize;
      copy_async(m.out[rank_] + off, m.out[p] + off, (begin(p + 1) - begin(p)) * esize, stream,
                 "cudaMemcpyAsync (all-gather of a peer's slice)");
    }
  }
  end_call(m, stream);
}

void IpcComm::reduce_scatter(const void* in, void* out, size_t count, DataType dtype, cudaStream_t stream) {
  check_open("reduce_scatter");
  check_sums(dtype, "reduce-scatter");
  const size_t bytes = count * element_size(dtype);
  // Only this rank writes `out`, and no peer reads it: it is not shared.
  const Mapped m = begin_call({Collective::reduce_scatter, 0, count, dtype, 0}, in, bytes * world_, out, 0, stream);
  if (count > 0) {
    const void* slices[kMaxRanks];
    for (int p = 0; p < world_; ++p) slices[p] = m.in[p] + static_cast<size_t>(rank_) * bytes;
    void* dst[1] = {out};
    launch_sum(dtype, dst, 1, slices, world_, 0, count, stream);
  }
  end_call(m, stream);
}

void IpcComm::all_gather(const void* in, void* out, size_t count, DataType dtype, cudaStream_t stream) {
  check_open("all_gather");
  const size_t bytes = count * dtype_size(dtype);
  const Mapped m = begin_call({Collective::all_gather, 0, count, dtype, 0}, in, bytes, out, 0, stream);
  for (int p = 0; p < world_; ++p)
    copy_async(static_cast<char*>(out) + static_cast<size_t>(p) * bytes, m.in[p], bytes, stream,
               "cudaMemcpyAsync (all-gather of a peer's input)");
  end_call(m, stream);
}

void IpcComm::broadcast(void* buf, size_t count, DataType dtype, int root, cudaStream_t stream) {
  check_open("broadcast");
  if (root < 0 || root >= world_) throw InvalidArgument("cuda_ipc: broadcast root " + std::to_string(root) + " out of range");
  const size_t bytes = count * dtype_size(dtype);
  const Mapped m = begin_call({Collective::broadcast, 0, count, dtype, root}, buf, rank_ == root ? bytes : 0, nullptr, 0, stream);
  if (rank_ != root) copy_async(buf, m.in[root], bytes, stream, "cudaMemcpyAsync (broadcast from the root)");
  end_call(m, stream);
}

void IpcComm::reduce(const void* in, void* out, size_t count, DataType dtype, int root, cudaStream_t stream) {
  check_open("reduce");
  check_sums(dtype, "reduce");
  if (root < 0 || root >= world_) throw InvalidArgument("cuda_ipc: reduce root " + std::to_string(root) + " out of range");
  const size_t bytes = count * element_size(dtype);
  // In place at the root: its sum would overwrite the input that the peers' kernels read; they
  // read a copy of it in the bounce buffer.
  const Mapped m = begin_call({Collective::reduce, 0, count, dtype, root}, in, bytes, nullptr, 0, stream,
                              rank_ == root && in == out && world_ > 1);
  if (rank_ == root && count > 0) {
    void* dst[1] = {out};
    launch_sum(dtype, dst, 1, reinterpret_cast<const void* const*>(m.in), world_, 0, count, stream);
  }
  end_call(m, stream);
}

void IpcComm::all_to_all(const void* in, void* out, size_t count, DataType dtype, cudaStream_t stream) {
  check_open("all_to_all");
  const size_t bytes = count * dtype_size(dtype);
  // In place: block p of the output overwrites block p of the input, which peer p reads.
  const Mapped m =
      begin_call({Collective::all_to_all, 0, count, dtype, 0}, in, bytes * world_, out, 0, stream, in == out && world_ > 1);
  for (int p = 0; p < world_; ++p)
    copy_async(static_cast<char*>(out) + static_cast<size_t>(p) * bytes, m.in[p] + static_cast<size_t>(rank_) * bytes,
               bytes, stream, "cudaMemcpyAsync (all-to-all block of a peer)");
  end_call(m, stream);
}

void IpcComm::gather(const void* in, void* out, size_t count, DataType dtype, int root, cudaStream_t stream) {
  check_open("gather");
  if (root < 0 || root >= world_) throw InvalidArgument("cuda_ipc: gather root " + std::to_string(root) + " out of range");
  const size_t bytes = count * dtype_size(dtype);
  // Every input is shared; the root alone writes, into its own output.
  const Mapped m = begin_call({Collective::gather, 0, count, dtype, root}, in, bytes, nullptr, 0, stream);
  if (rank_ == root)
    for (int p = 0; p < world_; ++p)
      copy_async(static_cast<char*>(out) + static_cast<size_t>(p) * bytes, m.in[p], bytes, stream,
                 "cudaMemcpyAsync (gather of a peer's input)");
  end_call(m, stream);
}

void IpcComm::scatter(const void* in, void* out, size_t count, DataType dtype, int root, cudaStream_t stream) {
  check_open("scatter");
  if (root < 0 || root >= world_) throw InvalidArgument("cuda_ipc: scatter root " + std::to_string(root) + " out of range");
  const size_t bytes = count * dtype_size(dtype);
  // The root's input alone is shared; every rank copies its block of it.
  const Mapped m = begin_call({Collective::scatter, 0, count, dtype, root}, in, rank_ == root ? bytes * world_ : 0, nullptr,
                              0, stream);
  copy_async(out, m.in[root] + static_cast<size_t>(rank_) * bytes, bytes, stream, "cudaMemcpyAsync (scatter from the root)");
  end_call(m, stream);
}

void IpcComm::barrier(cudaStream_t stream) {
  check_open("barrier");
  const Mapped m = begin_call({Collective::barrier, 0, 0, DataType::uint8, 0}, nullptr, 0, nullptr, 0, stream);
  end_call(m, stream);
}

void IpcComm::host_barrier() {
  check_open("host_barrier");
  // A call number of its own whose phases no stream records or writes: a later call's GPU
  // waits are for that call's number, which only its own records satisfy.
  ++seq_;
  for (Phase phase : {kReady, kDone}) {
    flags_.publish(phase, seq_);
    for (int p = 0; p < world_; ++p)
      if (p != rank_) flags_.wait(p, phase, seq_);
  }
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

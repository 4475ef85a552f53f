#include "engine/device_issue.hpp"

#include <algorithm>
#include <cstring>

#include "common/config.hpp"
#include "engine/validate.hpp"
#include "engine/work_access.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

namespace {

using algo::CollKind;

[[noreturn]] void refuse(const algo::CollArgs& a, const std::string& why) {
  throw InvalidArgument(std::string("kolo: ") + algo::coll_name(a.kind) + " refused: " + why);
}

// What the operation reads from and writes to, in elements of each buffer (the counts
// validate() checks), and which of them are read (copied in) and written (copied back).
struct Uses {
  size_t send_elems = 0, recv_elems = 0;
  bool send_read = false, send_written = false, recv_written = false;
};

Uses uses_of(const algo::CollArgs& a, int rank, int size) {
  const size_t n = a.count, N = static_cast<size_t>(size);
  const bool root = a.root == rank;
  Uses u;
  switch (a.kind) {
    case CollKind::broadcast:  // one buffer: the root's is read, the others' written
      u.send_elems = n;
      u.send_read = root;
      u.send_written = !root;
      break;
    case CollKind::allreduce:
      u.send_elems = u.recv_elems = n;
      break;
    case CollKind::reduce:
      u.send_elems = n;
      u.recv_elems = root ? n : 0;
      break;
    case CollKind::allgather:
      u.send_elems = n;
      u.recv_elems = n * N;
      break;
    case CollKind::gather:
      u.send_elems = n;
      u.recv_elems = root ? n * N : 0;
      break;
    case CollKind::scatter:
      u.send_elems = root ? n * N : 0;
      u.recv_elems = n;
      break;
    case CollKind::reduce_scatter:
      u.send_elems = n * N;
      u.recv_elems = n;
      break;
    case CollKind::alltoall:
      u.send_elems = u.recv_elems = n * N;
      break;
    case CollKind::alltoallv: {
      for (size_t i = 0; i < N; ++i) {
        if (a.v->send_counts[i]) u.send_elems = std::max(u.send_elems, a.v->send_displs[i] + a.v->send_counts[i]);
        if (a.v->recv_counts[i]) u.recv_elems = std::max(u.recv_elems, a.v->recv_displs[i] + a.v->recv_counts[i]);
      }
      break;
    }
    case CollKind::send:
      u.send_elems = n;
      break;
    case CollKind::recv:
      u.recv_elems = n;
      break;
    case CollKind::barrier:
      break;
  }
  if (a.kind != CollKind::broadcast) {
    u.send_read = u.send_elems > 0;
    u.recv_written = u.recv_elems > 0;
  }
  return u;
}

void check_pointer(kernels::DeviceRuntime& rt, const algo::CollArgs& a, const void* p, size_t elems, Device d,
                   const char* what) {
  if (elems == 0) return;
  const int on = rt.device_of(p);
  if (on != d.index)
    refuse(a, std::string(what) + " buffer is marked " + device_name(d) + " but its memory is " +
                  (on < 0 ? std::string("not device memory (host memory?)") : "on cuda:" + std::to_string(on)));
}

bool overlap(const char* p, size_t pn, const char* q, size_t qn) { return pn && qn && p < q + qn && q < p + pn; }

bool is_reduction(CollKind k) {
  return k == CollKind::allreduce || k == CollKind::reduce || k == CollKind::reduce_scatter;
}

size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// A reduction on device memory: the host transports only move bytes, and the GPU reduces
// (DeviceRuntime::reduce: kernels/cuda), in rank order, so every rank that reduces the same
// slices gets the same bits. Per chunk (all-reduce and reduce: KOLO_DEVICE_CHUNK_BYTES), one of:
//  - gathered: the chunks go where the result is wanted (all-reduce: an allgather; reduce: a
//    gather to the root; reduce-scatter: an all-to-all of the slices), and the GPU reduces the P
//    copies straight into the output. One host operation; each rank receives (P-1) chunks.
//  - two steps, above two ranks from KOLO_DEVICE_TWO_STEP_BYTES a chunk: an all-to-all hands rank
//    j the j-th slice of every rank's chunk, the GPU reduces the P slices, and an allgather (reduce:
//    a gather to the root) assembles the reduced slices, which are copied back. The bytes a ring
//    moves, 2(P-1)/P chunks per rank, instead of the gathered form's P-1.
// Two-step parts are ordered A0 A1 B0 A2 B1 ...: the engine moves chunk k+1's slices while the
// GPU reduces chunk k's. The choice depends on the operation, its count, the group's size and the
// configuration alone, so that every rank issues the same host operations.
StagedOperation stage_reduction(std::shared_ptr<DeviceStaging> staging, const algo::CollArgs& args, const Buffer& send,
                                const Buffer& recv, const CommonOptions& opts, int rank, int size) {
  if (!opts.algorithm.empty())
    refuse(args, "an algorithm was named (" + opts.algorithm + ") but a reduction on device memory runs as allgathers, "
                 "gathers and all-to-alls of its slices on the host, reduced on the GPU: name their algorithms in "
                 "KOLO_ALGO instead");
  const size_t es = args.elem_size(), P = static_cast<size_t>(size), me = static_cast<size_t>(rank);
  const bool scatter = args.kind == CollKind::reduce_scatter;
  const bool rooted = args.kind == CollKind::reduce;
  const bool wants_result = !rooted || args.root == rank;  // this rank's output is written
  char* in_dev = static_cast<char*>(const_cast<void*>(args.send));
  char* out_dev = static_cast<char*>(args.recv);
  // reduce-scatter: one chunk of count elements per rank (its input holds P of them).
  const size_t n = args.count;
  const size_t chunk_elems =
      scatter ? n : std::max<size_t>(1, static_cast<size_t>(config::get_int("KOLO_DEVICE_CHUNK_BYTES")) / es);
  const size_t n_chunks = (n + chunk_elems - 1) / chunk_elems;
  const bool two_step = !scatter && P > 2 &&
                        std::min(n, chunk_elems) * es >= static_cast<size_t>(config::get_int("KOLO_DEVICE_TWO_STEP_BYTES"));

  // Where each chunk lives in the pinned block: X (what the first host operation moves) and, in
  // two steps, Y (the reduced slices the second assembles).
  struct Chunk {
    size_t first = 0, count = 0, slice = 0;  // elements; slice: two steps' per-rank share (padded)
    size_t x = 0, y = 0;                     // byte offsets in the block
  };
  std::vector<Chunk> chunks(n_chunks);
  size_t block_bytes = 0;
  for (size_t k = 0; k < n_chunks; ++k) {
    Chunk& c = chunks[k];
    c.first = k * chunk_elems;
    c.count = std::min(chunk_elems, n - c.first);
    c.x = block_bytes;
    if (two_step) {
      c.slice = (c.count + P - 1) / P;
      c.y = c.x + round_up(P * c.slice * es);
      block_bytes = c.y + round_up((wants_result ? P : 1) * c.slice * es);
    } else {
      // All P copies where this rank reduces them; a reduce's other ranks hold their own only.
      block_bytes += round_up((wants_result ? P : 1) * c.count * es);
    }
  }

  const size_t parts_per_chunk = two_step ? 2 : 1;
  auto work = WorkAccess::make_derived<DeviceWork>(algo::coll_name(args.kind), 0, std::move(staging), opts.stream,
                                                   n_chunks * parts_per_chunk);
  work->dtype = args.dtype;
  work->op = args.op;
  work->nranks = size;
  char* block = work->take_block(block_bytes);
  size_t max_slice = 0;
  for (const Chunk& c : chunks) max_slice = std::max(max_slice, c.slice);
  // Where the copy stream reduces each chunk's slices in two steps (one at a time, in its order).
  char* scratch = two_step ? work->device_scratch(max_slice * es) : nullptr;
  StagedOperation staged;
  staged.host.resize(work->parts.size());

  // Host operation arguments over the block: kind, per-rank count, send and receive.
  auto host_op = [&](CollKind kind, size_t count, char* s, size_t s_elems, char* r, size_t r_elems) {
    HostOperation h{args, Buffer(s, s_elems, args.dtype), Buffer(r, r_elems, args.dtype)};
    h.args.kind = kind;
    h.args.step_of = algo::coll_name(args.kind);
    h.args.op = ReduceKind::sum;  // moved, not reduced
    h.args.count = count;
    h.args.send = s;
    h.args.recv = r;
    return h;
  };
  // Part order: A0 [A1 B0 A2 B1 ... B(n-1)] in two steps, A0 A1 ... in the gathered form.
  auto part_a = [&](size_t k) { return two_step ? (k == 0 ? 0 : 2 * k - 1) : k; };
  auto part_b = [&](size_t k) { return k + 1 == n_chunks ? 2 * k + 1 : 2 * k + 2; };

  for (size_t k = 0; k < n_chunks; ++k) {
    const Chunk& c = chunks[k];
    char* x = block + c.x;
    DeviceWork::Part& a = work->parts[part_a(k)];
    a.gated = true;
    if (!two_step) {
      const size_t bytes = c.count * es;
      if (scatter) {  // all P slices of the input; each rank's slice j goes to rank j
        a.in[0] = {in_dev, x, P * bytes};
        staged.host[part_a(k)] = host_op(CollKind::alltoall, n, x, P * n, x, P * n);
      } else {
        char* own = wants_result ? x + me * bytes : x;  // in place: the gathers' own slot
        a.in[0] = {in_dev + c.first * es, own, bytes};
        staged.host[part_a(k)] = rooted ? host_op(CollKind::gather, c.count, own, c.count, wants_result ? x : nullptr,
                                                  wants_result ? P * c.count : 0)
                                        : host_op(CollKind::allgather, c.count, own, c.count, x, P * c.count);
      }
      if (wants_result)
        a.reduce = {out_dev + c.first * es, x, bytes, size, c.count};
      continue;
    }
    // Two steps. The padding past the chunk is zeroed, so that the GPU reduces defined values.
    const size_t slice_bytes = c.slice * es;
    std::memset(x + c.count * es, 0, P * slice_bytes - c.count * es);
    a.in[0] = {in_dev + c.first * es, x, c.count * es};
    staged.host[part_a(k)] = host_op(CollKind::alltoall, c.slice, x, P * c.slice, x, P * c.slice);
    char* y = block + c.y;
    char* mine = wants_result ? y + me * slice_bytes : y;
    // Reduced in device memory, then copied into the block: each slice crosses the bus once.
    a.reduce = {scratch, x, slice_bytes, size, c.slice, mine};
    a.feeds = part_b(k);
    DeviceWork::Part& b = work->parts[part_b(k)];
    b.gated = true;
    b.ready_from_gpu = true;
    staged.host[part_b(k)] = rooted ? host_op(CollKind::gather, c.slice, mine, c.slice, wants_result ? y : nullptr,
                                              wants_result ? P * c.slice : 0)
                                    : host_op(CollKind::allgather, c.slice, mine, c.slice, y, P * c.slice);
    if (wants_result) b.out = {out_dev + c.first * es, y, c.count * es};
  }
  (void)send;
  (void)recv;
  work->queue();
  staged.work = std::move(work);
  return staged;
}

}  // namespace

CheckedDevice check_device_operation(GroupDevice& group, const algo::CollArgs& args, const Buffer& send,
                                     const Buffer& recv, int rank, int size) {
  const Uses u = uses_of(args, rank, size);
  // The operation's device: the buffer it uses first. A host buffer there makes it a host
  // operation, and validate() refuses a device buffer it would also use.
  const Device device = args.kind == CollKind::recv ? recv.device
                        : u.send_elems > 0         ? send.device
                        : u.recv_elems > 0         ? recv.device
                        : send.device.is_cuda()    ? send.device
                                                   : recv.device;
  validate(args, send, recv, rank, size, device);
  CheckedDevice checked{device, nullptr};
  if (device.is_cpu()) return checked;  // validated: the device buffer is one this rank does not use

  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (rt == nullptr)
    refuse(args, "its buffers are CUDA memory (" + device_name(device) +
                     ") but this build of kolo has no CUDA support (configured without the CUDA toolkit)");
  if (device.index < 0 || device.index >= rt->device_count()) {
    const std::string why = rt->unavailable_reason();
    refuse(args, "its buffers are on " + device_name(device) + " but " +
                     (rt->device_count() == 0 ? "no CUDA device is usable" + (why.empty() ? "" : " (" + why + ")")
                                              : "this process sees " + std::to_string(rt->device_count()) + " CUDA devices"));
  }
  if (!rt->can_wait_on_flags())
    refuse(args, "this GPU or driver cannot make a stream wait on a flag in host memory (cuStreamWaitValue32), "
                 "which kolo's staging of device memory needs");
  check_pointer(*rt, args, args.send, u.send_elems, device, args.kind == CollKind::broadcast ? "the" : "send");
  check_pointer(*rt, args, args.recv, u.recv_elems, device, "receive");
  {
    std::lock_guard<std::mutex> lk(group.mu);
    if (group.device < 0)
      group.device = device.index;
    else if (group.device != device.index)
      refuse(args, "its buffers are on " + device_name(device) + " but this group runs on cuda:" +
                       std::to_string(group.device) + " (its first device operation's device)");
  }
  checked.rt = rt;
  return checked;
}

DeviceCurrent::DeviceCurrent(kernels::DeviceRuntime& r, int device) : rt(r), previous(r.current_device()) {
  if (previous != device) rt.set_device(device);
}

DeviceCurrent::~DeviceCurrent() {
  try {
    if (rt.current_device() != previous) rt.set_device(previous);
  } catch (...) {
  }
}

StagedOperation stage_device_operation(GroupDevice& group, const CheckedDevice& checked, const algo::CollArgs& args,
                                       const Buffer& send, const Buffer& recv, const CommonOptions& opts, int rank,
                                       int size) {
  const Uses u = uses_of(args, rank, size);
  const Device device = checked.device;
  StagedOperation staged;
  if (device.is_cpu()) {
    HostOperation h{args, send, recv};
    h.send.device = h.recv.device = Device::cpu();
    staged.host.push_back(h);
    return staged;
  }
  kernels::DeviceRuntime* rt = checked.rt;
  const size_t es = args.elem_size();
  std::shared_ptr<DeviceStaging> staging;
  {
    std::lock_guard<std::mutex> lk(group.mu);
    if (!group.staging)
      group.staging = std::make_shared<DeviceStaging>(*rt, device.index,
                                                      static_cast<size_t>(config::get_int("KOLO_DEVICE_STAGE_BYTES")));
    staging = group.staging;
  }

  DeviceCurrent current(*rt, device.index);
  if (is_reduction(args.kind) && args.count > 0)
    return stage_reduction(std::move(staging), args, send, recv, opts, rank, size);
  // Large broadcasts (elementwise: chunk k of the output depends on chunk k of the input only)
  // run as one host operation per chunk.
  const bool elementwise = args.kind == CollKind::broadcast;
  const size_t chunk_elems = std::max<size_t>(1, static_cast<size_t>(config::get_int("KOLO_DEVICE_CHUNK_BYTES")) / es);
  const size_t n_parts = elementwise && args.count > chunk_elems ? (args.count + chunk_elems - 1) / chunk_elems : 1;
  auto work = WorkAccess::make_derived<DeviceWork>(algo::coll_name(args.kind), 0, staging, opts.stream, n_parts);
  // The device ranges read and written; one pinned region covering both when they overlap (the
  // in-place forms), so that the host operation sees the same aliasing.
  char* in_dev = static_cast<char*>(const_cast<void*>(args.send));
  const size_t in_bytes = u.send_read ? u.send_elems * es : 0;
  char* out_dev = static_cast<char*>(args.kind == CollKind::broadcast ? const_cast<void*>(args.send) : args.recv);
  const size_t out_bytes = (u.send_written ? u.send_elems : u.recv_written ? u.recv_elems : 0) * es;
  // The host operation's pointers: what lies in a staged range moves into the block; the rest
  // (buffers the operation does not use here) stays as it was and is never touched.
  char* in_host = nullptr;
  char* out_host = nullptr;
  if (overlap(in_dev, in_bytes, out_dev, out_bytes)) {
    char* lo = std::min(in_dev, out_dev);
    char* hi = std::max(in_dev + in_bytes, out_dev + out_bytes);
    char* block = work->take_block(static_cast<size_t>(hi - lo));
    in_host = block + (in_dev - lo);
    out_host = block + (out_dev - lo);
  } else if (in_bytes + out_bytes > 0) {
    const size_t in_room = (in_bytes + 255) / 256 * 256;
    char* block = work->take_block(in_room + out_bytes);
    in_host = block;
    out_host = block + in_room;
  }
  auto to_host = [&](const void* p, size_t bytes_used) -> void* {
    char* c = static_cast<char*>(const_cast<void*>(p));
    if (in_bytes && c >= in_dev && c + bytes_used <= in_dev + in_bytes) return in_host + (c - in_dev);
    if (out_bytes && c >= out_dev && c + bytes_used <= out_dev + out_bytes) return out_host + (c - out_dev);
    return c;
  };
  HostOperation whole{args, {}, {}};
  whole.args.send = to_host(args.send, u.send_elems * es);
  whole.args.recv =
      args.kind == CollKind::broadcast ? const_cast<void*>(whole.args.send) : to_host(args.recv, u.recv_elems * es);
  // A buffer this rank does not use takes the type of the one it uses (validate compares them).
  whole.send = Buffer(const_cast<void*>(whole.args.send), u.send_elems, u.send_elems ? send.dtype : args.dtype);
  whole.recv = Buffer(whole.args.recv, u.recv_elems, u.recv_elems ? recv.dtype : args.dtype);
  if (n_parts == 1) {
    DeviceWork::Part& p = work->parts[0];
    p.in[0] = {in_dev, in_host, in_bytes};
    p.out = {out_dev, out_host, out_bytes};
    // alltoallv's receive buffer has gaps between the blocks it writes: copying the whole range
    // back must return what the gaps held, so it is copied in too.
    if (args.kind == CollKind::alltoallv) p.in[1] = {out_dev, out_host, out_bytes};
    p.gated = in_bytes + p.in[1].bytes > 0;
    staged.host.push_back(whole);
  } else {
    // Chunk k: elements [k*chunk_elems, ...) of every range and of every buffer this rank uses.
    for (size_t k = 0; k < n_parts; ++k) {
      const size_t first = k * chunk_elems, count = std::min(chunk_elems, args.count - first), off = first * es;
      DeviceWork::Part& p = work->parts[k];
      if (in_bytes) p.in[0] = {in_dev + off, in_host + off, count * es};
      if (out_bytes) p.out = {out_dev + off, out_host + off, count * es};
      p.gated = in_bytes > 0;
      HostOperation h = whole;
      h.args.count = count;
      // A buffer this rank uses moves to chunk k; one it does not use stays as it is.
      auto shift = [off](const void* ptr, size_t used) {
        char* c = static_cast<char*>(const_cast<void*>(ptr));
        return used ? c + off : c;
      };
      h.args.send = shift(whole.args.send, u.send_elems);
      h.args.recv = args.kind == CollKind::broadcast ? const_cast<void*>(h.args.send) : shift(whole.args.recv, u.recv_elems);
      h.send = Buffer(const_cast<void*>(h.args.send), u.send_elems ? count : 0, whole.send.dtype);
      h.recv = Buffer(h.args.recv, u.recv_elems ? count : 0, whole.recv.dtype);
      staged.host.push_back(h);
    }
  }
  work->queue();
  staged.work = std::move(work);
  return staged;
}

}  // namespace kolo::engine

#include "engine/validate.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "kolo/error.hpp"
#include "kolo/process_group.hpp"

namespace kolo::engine {

namespace {

using algo::CollKind;

// Cold and out of line, with the messages it builds: the checks below inline into validate()
// (every issue passes there) and only a refusal pays for the strings.
[[noreturn, gnu::cold, gnu::noinline]] void refuse(const algo::CollArgs& a, const std::string& why) {
  throw InvalidArgument(std::string("kolo: ") + algo::coll_name(a.kind) + " refused: " + why);
}

// Checks that `count` elements of `elem` bytes, times `mult`, fits in size_t and returns the bytes.
// The compiler's overflow-checked multiply (a flag test), not a division per check: every issue
// passes here.
[[noreturn, gnu::cold, gnu::noinline]] void refuse_overflow(const algo::CollArgs& a, size_t count, size_t mult, const char* what) {
  refuse(a, std::string(what) + " count " + std::to_string(count) + " x " + std::to_string(mult) + " elements overflows the address space");
}

[[gnu::always_inline]] inline size_t checked_bytes(const algo::CollArgs& a, size_t count, size_t mult, const char* what) {
  size_t elems, bytes;
  if (__builtin_mul_overflow(count, mult, &elems) || __builtin_mul_overflow(elems, a.elem_size(), &bytes))
    refuse_overflow(a, count, mult, what);
  return bytes;
}

// Which of check_buffer's rules `b` breaks, as a message.
[[noreturn, gnu::cold, gnu::noinline]] void refuse_buffer(const algo::CollArgs& a, const Buffer& b, const void* ptr,
                                                          size_t need_elems, const char* what, Device device) {
  if (b.dtype != a.dtype)
    refuse(a, std::string(what) + " buffer is " + dtype_name(b.dtype) + " but the send buffer is " + dtype_name(a.dtype));
  if (!(b.device == device))
    refuse(a, std::string(what) + " buffer is on " + device_name(b.device) + " but the operation's other buffer is on " +
                  device_name(device) + ": all buffers of one operation must be on one device (host memory, or one GPU)");
  if (need_elems > 0 && ptr == nullptr)
    refuse(a, std::string(what) + " buffer is null but " + std::to_string(need_elems) + " elements are needed");
  refuse(a, std::string(what) + " buffer holds " + std::to_string(b.count) + " elements but " + std::to_string(need_elems) + " are needed");
}

[[gnu::always_inline]] inline void check_buffer(const algo::CollArgs& a, const Buffer& b, const void* ptr, size_t need_elems,
                                                const char* what, Device device) {
  if (b.dtype != a.dtype || b.device.type != device.type || b.device.index != device.index ||
      (need_elems > 0 && ptr == nullptr) || b.count < need_elems)
    refuse_buffer(a, b, ptr, need_elems, what, device);
}

bool overlaps(const void* p, size_t pn, const void* q, size_t qn) {
  if (pn == 0 || qn == 0 || p == nullptr || q == nullptr) return false;
  auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  return a < b + qn && b < a + pn;
}

}  // namespace

void validate(const algo::CollArgs& a, const Buffer& send, const Buffer& recv, int rank, int size, Device device) {
  if (static_cast<int>(a.dtype) >= kNumDataTypes) refuse(a, "unknown dtype " + std::to_string(static_cast<int>(a.dtype)));
  if (static_cast<int>(a.op.kind) >= kNumReduceKinds) refuse(a, "unknown reduce op " + std::to_string(static_cast<int>(a.op.kind)));
  const bool reduces = a.kind == CollKind::allreduce || a.kind == CollKind::reduce || a.kind == CollKind::reduce_scatter;
  if (reduces && a.op.is_bitwise() && is_floating(a.dtype))
    refuse(a, std::string("bitwise op ") + reduce_name(a.op.kind) + " is not defined for " + dtype_name(a.dtype));
  const bool rooted = a.kind == CollKind::broadcast || a.kind == CollKind::reduce || a.kind == CollKind::gather ||
                      a.kind == CollKind::scatter;
  if (rooted && (a.root < 0 || a.root >= size))
    refuse(a, "root " + std::to_string(a.root) + " is not a rank of this group of " + std::to_string(size));
  const bool is_root = a.root == rank;
  const size_t n = a.count, es = a.elem_size(), N = static_cast<size_t>(size);

  switch (a.kind) {
    case CollKind::broadcast:
      checked_bytes(a, n, 1, "buffer");
      check_buffer(a, send, a.send, n, "broadcast", device);
      return;
    case CollKind::allreduce:
    case CollKind::reduce: {
      checked_bytes(a, n, 1, "send");
      check_buffer(a, send, a.send, n, "send", device);
      bool recv_needed = a.kind == CollKind::allreduce || is_root;
      if (recv_needed) {
        check_buffer(a, recv, a.recv, n, "receive", device);
        if (a.send != a.recv && overlaps(a.send, n * es, a.recv, n * es))
          refuse(a, "send and receive buffers overlap without being the same (in-place means equal pointers)");
      }
      return;
    }
    case CollKind::allgather:
    case CollKind::gather: {
      size_t total = checked_bytes(a, n, N, "receive");
      check_buffer(a, send, a.send, n, "send", device);
      bool recv_needed = a.kind == CollKind::allgather || is_root;
      if (recv_needed) {
        check_buffer(a, recv, a.recv, n * N, "receive", device);
        const char* own = static_cast<const char*>(a.recv) + static_cast<size_t>(rank) * n * es;
        if (a.send != own && overlaps(a.send, n * es, a.recv, total))
          refuse(a, "send buffer overlaps the receive buffer; in-place means send == recv + rank*count");
      }
      return;
    }
    case CollKind::scatter:
    case CollKind::reduce_scatter: {
      size_t total = checked_bytes(a, n, N, "send");
      bool send_needed = a.kind == CollKind::reduce_scatter || is_root;
      if (send_needed) check_buffer(a, send, a.send, n * N, "send", device);
      check_buffer(a, recv, a.recv, n, "receive", device);
      if (send_needed) {
        const char* own = static_cast<const char*>(a.send) + static_cast<size_t>(rank) * n * es;
        if (a.recv != own && overlaps(a.send, total, a.recv, n * es))
          refuse(a, "receive buffer overlaps the send buffer; in-place means recv == send + rank*count");
      }
      return;
    }
    case CollKind::alltoall: {
      size_t total = checked_bytes(a, n, N, "send");
      check_buffer(a, send, a.send, n * N, "send", device);
      check_buffer(a, recv, a.recv, n * N, "receive", device);
      if (a.send != a.recv && overlaps(a.send, total, a.recv, total))
        refuse(a, "send and receive buffers overlap without being the same");
      return;
    }
    case CollKind::alltoallv: {
      if (!a.v) refuse(a, "no counts and displacements");
      const algo::VarCounts& v = *a.v;
      const char* names[4] = {"send_counts", "send_displs", "recv_counts", "recv_displs"};
      const std::vector<size_t>* vecs[4] = {&v.send_counts, &v.send_displs, &v.recv_counts, &v.recv_displs};
      for (int i = 0; i < 4; ++i)
        if (vecs[i]->size() != N)
          refuse(a, std::string(names[i]) + " has " + std::to_string(vecs[i]->size()) + " entries; the group has " + std::to_string(size) + " ranks");
      size_t send_end = 0, recv_end = 0;
      for (size_t i = 0; i < N; ++i) {
        if (v.send_displs[i] > std::numeric_limits<size_t>::max() - v.send_counts[i] ||
            v.recv_displs[i] > std::numeric_limits<size_t>::max() - v.recv_counts[i])
          refuse(a, "count + displacement overflows for rank " + std::to_string(i));
        if (v.send_counts[i]) send_end = std::max(send_end, v.send_displs[i] + v.send_counts[i]);
        if (v.recv_counts[i]) recv_end = std::max(recv_end, v.recv_displs[i] + v.recv_counts[i]);
      }
      checked_bytes(a, send_end, 1, "send");
      checked_bytes(a, recv_end, 1, "receive");
      check_buffer(a, send, a.send, send_end, "send", device);
      check_buffer(a, recv, a.recv, recv_end, "receive", device);
      if (overlaps(a.send, send_end * es, a.recv, recv_end * es))
        refuse(a, "send and receive buffers overlap (alltoallv has no in-place form)");
      return;
    }
    case CollKind::barrier:
      return;
    case CollKind::send:
    case CollKind::recv: {
      if (a.kind == CollKind::recv && a.root == kAnySource) {
        if (size < 2) refuse(a, "a receive from any source in a group of 1 has nobody to receive from");
      } else if (a.root < 0 || a.root >= size || a.root == rank)
        refuse(a, "peer " + std::to_string(a.root) + " is not another rank of this group of " + std::to_string(size));
      checked_bytes(a, n, 1, "buffer");
      check_buffer(a, a.kind == CollKind::send ? send : recv, a.kind == CollKind::send ? a.send : a.recv, n, "message", device);
      return;
    }
  }
  refuse(a, "unknown collective");
}

}  // namespace kolo::engine

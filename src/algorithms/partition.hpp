// How algorithms cut a buffer: into one block per rank (as equal as possible) and into chunks
// of comm.chunk_bytes() for pipelining. Everything is in elements; byte_at() turns an element
// offset into an address so no algorithm ever assumes a particular element type.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "algorithms/comm.hpp"

namespace kolo::algo {

// A run of elements: [offset, offset + count).
struct Span {
  size_t offset = 0;
  size_t count = 0;
};

// Block i of `total` elements cut into `parts` blocks whose sizes differ by at most one (the
// first total % parts blocks get the extra element). Works for total < parts and total == 0.
inline Span block_of(size_t total, int parts, int i) {
  const size_t n = static_cast<size_t>(parts), k = static_cast<size_t>(i);
  const size_t base = total / n, extra = total % n;
  return {k * base + std::min(k, extra), base + (k < extra ? 1 : 0)};
}

// Elements per pipelining chunk: at least one, so a chunk size below the element size still
// makes progress.
inline size_t chunk_elems(const Comm& comm) {
  return std::max<size_t>(1, comm.chunk_bytes() / comm.args().elem_size());
}

inline size_t num_chunks(size_t count, size_t per_chunk) { return (count + per_chunk - 1) / per_chunk; }

// Chunk j of `s` (the last one may be short).
inline Span chunk_of(Span s, size_t per_chunk, size_t j) {
  const size_t off = j * per_chunk;
  return {s.offset + off, std::min(per_chunk, s.count - off)};
}

inline char* byte_at(void* base, size_t elems, size_t elem_size) { return static_cast<char*>(base) + elems * elem_size; }
inline const char* byte_at(const void* base, size_t elems, size_t elem_size) {
  return static_cast<const char*>(base) + elems * elem_size;
}

// Copies unless source and destination are the same memory (the in-place case).
inline void copy_unless_same(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes != 0) std::memcpy(dst, src, bytes);
}

// A reduction with nothing to exchange (one rank, or count 0 where every rank knows it): the
// result is the rank's own input, finalized as the op says (AVG divides, PREMUL_SUM scales).
inline void result_is_own_input(Comm& comm) {
  const CollArgs& a = comm.args();
  copy_unless_same(a.recv, a.send, a.count * a.elem_size());
  comm.finalize(a.recv, a.count);
}

// A broadcast's one buffer: ProcessGroup::broadcast passes it in either field; the root's input
// is copied over when both are given and differ.
inline char* broadcast_buffer(const CollArgs& a, int rank) {
  char* buf = static_cast<char*>(a.recv != nullptr ? a.recv : const_cast<void*>(a.send));
  if (rank == a.root && a.send != nullptr) copy_unless_same(buf, a.send, a.count * a.elem_size());
  return buf;
}

// In-place all-to-all: rank r's outgoing blocks copied to scratch slot 0 before incoming blocks
// land on them; block r is left out (it stays where it is and is never sent). Returns the copy,
// laid out like the buffer.
inline const char* copy_outgoing_blocks(Comm& comm, const char* buf, int P, int r, size_t block_bytes) {
  char* copy = static_cast<char*>(comm.scratch(static_cast<size_t>(P) * block_bytes, 0));
  const size_t before = static_cast<size_t>(r) * block_bytes, after_at = before + block_bytes;
  std::memcpy(copy, buf, before);
  std::memcpy(copy + after_at, buf + after_at, static_cast<size_t>(P - 1 - r) * block_bytes);
  return copy;
}

// Python-style modulo for ring arithmetic: always in [0, n). A division costs 4-5 ns here (10-40
// cycles), and a small collective at 4 ranks computed a dozen: the usual x in (-n, n) takes a
// compare instead.
inline int ring_mod(int x, int n) {
  if (x >= 0) return x < n ? x : x % n;
  return x >= -n ? x + n : ((x % n) + n) % n;
}
// (a + b) mod n for a and b in [0, n): a peer's rank i steps along the ring.
inline int add_mod(int a, int b, int n) {
  const int s = a + b;
  return s >= n ? s - n : s;
}

}  // namespace kolo::algo

// The only thing an algorithm talks to. It hides which transport carries each message and
// supplies the collective's reduction, scratch memory and chunk size.
//
// Matching rule: messages between two ranks match in the order they were posted, per
// direction. An algorithm must post its sends to a peer in the same order as that peer posts
// the matching receives. Every message is stamped with the collective's sequence number and
// fingerprint; a receive that meets another collective's message fails with MismatchError.
// Never wait for a send before posting the receive the peer needs to make progress.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include "algorithms/collective.hpp"
#include "algorithms/host_layout.hpp"

namespace kolo::algo {

struct Req {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const CollArgs& args() const = 0;
  // Which ranks share a host (hierarchical algorithms read it; the others need not).
  virtual const HostLayout& hosts() const = 0;

  // Non-blocking point-to-point. Buffers stay untouched by the algorithm until wait() returns.
  // A zero-byte message is legal and still matched.
  virtual Req isend(int peer, const void* buf, size_t bytes) = 0;
  virtual Req irecv(int peer, void* buf, size_t bytes) = 0;
  // Blocks (driving progress) until done; bounded by the collective's deadline. Throws
  // PeerError, MismatchError or TimeoutError naming the peer, the collective and its sequence.
  virtual void wait(Req r) = 0;
  // Drives progress without blocking; true if r is done (throws on failure like wait).
  virtual bool test(Req r) = 0;
  void wait_all(std::initializer_list<Req> rs) { for (Req r : rs) if (r.valid()) wait(r); }
  void wait_all(std::span<Req> rs) { for (Req r : rs) if (r.valid()) wait(r); }
  // One exchange with `peer`: sends `out` (unless null) and receives into `in` (unless null),
  // returning when both are done: irecv, isend and both waits. An implementation may do it in
  // one step (the engine's direct path moves both messages straight through the pair); the
  // matching rule is the same as for the four calls.
  virtual void exchange(int peer, const void* out, size_t out_bytes, void* in, size_t in_bytes) {
    const Req r = in != nullptr ? irecv(peer, in, in_bytes) : Req{};
    const Req s = out != nullptr ? isend(peer, out, out_bytes) : Req{};
    wait_all({r, s});
  }

  // Receiving from any source (recv_any.cpp); a Comm that cannot (a sub-group's, a test's)
  // keeps these defaults, which refuse. peek_p2p: true when the next message from `peer` that
  // no receive waits for is a point-to-point message with args().tag (consumes nothing).
  // wait_for_arrival: drives progress until something may have arrived, sleeping when idle;
  // throws at the deadline (TimeoutError naming the tag) or on the group's failure.
  // receive_from: this receive takes its message from `peer`: irecv(peer, ...) then carries
  // the tag that pair's next point-to-point message must have, and the Work reports `peer`.
  virtual bool peek_p2p(int peer);
  virtual void wait_for_arrival();
  virtual void receive_from(int peer);

  // The collective's reduction (dtype and op from args()): dst = dst op src / dst = a op b.
  virtual void reduce(void* dst, const void* src, size_t count) = 0;
  virtual void reduce(void* dst, const void* a, const void* b, size_t count) = 0;
  // Applies avg's division / premul_sum's factor. Call exactly once on each element of a fully
  // reduced result, before it is sent on or returned.
  virtual void finalize(void* data, size_t count) = 0;

  // Scratch memory owned by the group, valid until the collective returns; 64-byte aligned.
  // Calls with different `slot` numbers return non-overlapping memory.
  virtual void* scratch(size_t bytes, int slot = 0) = 0;
  // Memory for the collective's own bookkeeping (request lists, block pointers: see
  // temp_list.hpp), uninitialised, 16-byte aligned, valid until the collective returns. It costs
  // no heap allocation once the group has run its largest collective.
  virtual void* temp(size_t bytes) = 0;
  // Pipelining granularity for large messages (KOLO_CHUNK_BYTES).
  virtual size_t chunk_bytes() const = 0;
};

// Convenience: exchange with two peers at once (the send never blocks the receive).
inline void sendrecv(Comm& c, int to, const void* sbuf, size_t sbytes, int from, void* rbuf, size_t rbytes) {
  if (to == from) return c.exchange(to, sbuf, sbytes, rbuf, rbytes);
  Req r = c.irecv(from, rbuf, rbytes);
  Req s = c.isend(to, sbuf, sbytes);
  c.wait(r);
  c.wait(s);
}

}  // namespace kolo::algo

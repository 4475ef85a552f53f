// Recv "any": a receive from whichever rank sends a point-to-point message with this receive's
// tag first (ProcessGroup::recv with kAnySource; torch's dist.recv without src).
//
// Messages match strictly in posting order per pair, so a receive posted on every pair would
// take a message from several peers. Instead it looks, without consuming, at the next message of
// every pair (Comm::peek_p2p, the transports' peek_incoming) until one is a point-to-point
// message with its tag, and then posts one real receive on that pair only, which receives that
// very message (nothing else can be posted meanwhile: the group runs this to completion before
// its next operation). A pair whose next message is something else (another tag, a later
// collective's) is simply no candidate now. When several pairs have one ready, the lowest rank
// wins (the scan goes 0, 1, ..., size - 1); a rank that sends continuously can thus delay a
// higher one, as MPI's any-source allows. The size must equal the buffer's: the real receive
// checks tag and size as for a named source, so a mismatch fails naming the sender.
#include "algorithms/algorithm.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  for (;;) {
    for (int peer = 0; peer < comm.size(); ++peer) {
      if (peer == comm.rank() || !comm.peek_p2p(peer)) continue;
      comm.receive_from(peer);
      comm.wait(comm.irecv(peer, a.recv, a.bytes()));
      return;
    }
    comm.wait_for_arrival();  // bounded by the receive's deadline
  }
}

// Only for receives without a named source; those with one take "direct".
bool supports(const CollArgs& args, const HostLayout&) { return args.root < 0; }

}  // namespace

const Algorithm kRecvAny{.name = "any", .wire_id = 26, .serves = {CollKind::recv}, .run = run, .supports = supports};
KOLO_REGISTER_ALGORITHM(kRecvAny);

}  // namespace kolo::algo

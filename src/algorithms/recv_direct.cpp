// Recv "direct": one message from args().root, matching the peer's send "direct".
#include "algorithms/algorithm.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  comm.wait(comm.irecv(a.root, a.recv, a.bytes()));
}

}  // namespace

extern const Algorithm kRecvDirect;
const Algorithm kRecvDirect{"direct", CollKind::recv, nullptr, run};

}  // namespace kolo::algo

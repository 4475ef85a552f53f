// Send "direct": one message to args().root, matched by the peer's recv "direct".
#include "algorithms/algorithm.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  comm.wait(comm.isend(a.root, a.send, a.bytes()));
}

}  // namespace

extern const Algorithm kSendDirect;
const Algorithm kSendDirect{"direct", CollKind::send, nullptr, run};

}  // namespace kolo::algo

// Send "direct": one message to args().root, matched by the peer's recv "direct".
#include "algorithms/algorithm.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  comm.wait(comm.isend(a.root, a.send, a.bytes()));
}

}  // namespace

const Algorithm kSendDirect{.name = "direct", .wire_id = 19, .serves = {CollKind::send}, .run = run};
KOLO_REGISTER_ALGORITHM(kSendDirect);

}  // namespace kolo::algo

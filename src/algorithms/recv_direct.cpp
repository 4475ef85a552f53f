// Recv "direct": one message from args().root, matching the peer's send "direct".
#include "algorithms/algorithm.hpp"

namespace kolo::algo {
namespace {

void run(Comm& comm) {
  const CollArgs& a = comm.args();
  comm.wait(comm.irecv(a.root, a.recv, a.bytes()));
}

}  // namespace

const Algorithm kRecvDirect{.name = "direct", .wire_id = 20, .serves = {CollKind::recv}, .run = run};
KOLO_REGISTER_ALGORITHM(kRecvDirect);

}  // namespace kolo::algo

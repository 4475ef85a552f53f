// algo::Comm's refusals for what only the engine's Comm can do: looking at incoming messages
// across the group. A sub-group (SubComm) or a test's in-process Comm has no transports to look
// at, so an algorithm that needs them run there is a bug, reported as one.
#include "algorithms/comm.hpp"

#include <stdexcept>

namespace kolo::algo {

static std::logic_error cannot(const char* what) {
  return std::logic_error(std::string("kolo: algorithm bug: ") + what + " needs the engine's Comm (receive from any source)");
}

bool Comm::peek_p2p(int) { throw cannot("peek_p2p"); }
void Comm::wait_for_arrival() { throw cannot("wait_for_arrival"); }
void Comm::receive_from(int) { throw cannot("receive_from"); }

}  // namespace kolo::algo

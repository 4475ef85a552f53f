// The names a cuda_ipc all-reduce and its ordering go by, apart from ipc_comm.hpp (which needs
// the CUDA runtime header) so that the cost model (ipc_cost_model.hpp) and its tests build
// without CUDA.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace kolo::cuda_ipc {

enum class Algo : uint32_t {
  kOneShot = 1,  // every rank reads every rank's whole input: one kernel, for small messages
  kTwoShot = 2,  // reduce-scatter (rank r sums slice r from all inputs) then all-gather (copy
                 // the other slices from the peers' outputs): less traffic, for large messages
  kTwoShotPush = 3,  // both shots in one kernel: rank r sums slice r from all inputs and writes
                     // it into every rank's output. The least HBM traffic (2 N S: each input
                     // read once, each output written once) and no phase between: made for
                     // ranks that share one GPU's memory.
  kLeaderPush = 4,  // rank 0 alone sums every input into every rank's output, in one kernel
                    // over the whole buffer; the others only take part in the handshakes. The
                    // same traffic as two-shot-push (2 N S) but one kernel on the GPU instead of
                    // N from N processes, which without MPS the GPU runs one time slice after
                    // another: for ranks sharing one GPU. In place too (each element is read and
                    // then written by the same thread).
  kRing = 5,  // P - 1 reduce-scatter steps then P - 1 all-gather steps, each reading one chunk
              // from the left neighbour only, with a handshake with it between steps: the
              // classic ring, 2 P - 1 phases (ipc_comm.cpp has the order of its sums).
};
// Every algorithm, in the order the selection breaks exact ties in (the ring last: at 2 ranks
// it is two-shot step for step, and ties with it).
inline constexpr Algo kAllAlgos[] = {Algo::kOneShot, Algo::kTwoShot, Algo::kTwoShotPush, Algo::kLeaderPush, Algo::kRing};

const char* algo_name(Algo a);  // one-shot, two-shot, two-shot-push, leader-push, ring
// The algorithm named `name` (algo_name's spelling); nullopt for "auto" or "". Any other
// name throws InvalidArgument naming `what` (the setting it came from) and the valid names.
std::optional<Algo> algo_by_name(const std::string& name, const char* what);

// How a rank's stream is made to wait for a peer's phase of a call (IpcComm::Options).
enum class Ordering { events, flags, host };
const char* ordering_name(Ordering o);

}  // namespace kolo::cuda_ipc

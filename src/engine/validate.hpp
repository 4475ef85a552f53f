// Argument checks run on the caller's thread before anything is queued: a bad call throws
// InvalidArgument and no byte moves.
#pragma once
#include "algorithms/collective.hpp"
#include "kolo/buffer.hpp"

namespace kolo::engine {

// Checks `args` (already filled from the user's buffers) for a group of `size` with this `rank`.
// `send_buf` and `recv_buf` are the user's views, for dtype/device/length checks.
// `device`: where every buffer the operation uses must live (the first one's device).
void validate(const algo::CollArgs& args, const Buffer& send_buf, const Buffer& recv_buf, int rank, int size,
              Device device = Device::cpu());

}  // namespace kolo::engine

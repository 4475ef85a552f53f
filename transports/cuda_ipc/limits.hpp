// The most ranks one cuda_ipc communicator joins (one node: eight GPUs, or ranks sharing them).
// Apart from the kernels' header so that the host-only parts build without CUDA.
#pragma once

namespace kolo::cuda_ipc {
constexpr int kMaxRanks = 8;
}  // namespace kolo::cuda_ipc

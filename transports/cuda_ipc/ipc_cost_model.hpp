// The cost model of the cuda_ipc all-reduce (docs/COST_MODEL.md, "CUDA IPC (one node)"): how
// long each algorithm of ipc_comm.cpp takes for P ranks and n bytes per rank, so that the
// engine's all-reduce runs the one predicted fastest (ipc_device_collectives.cpp). No CUDA here:
// built and unit-tested everywhere (tests/cuda_ipc/ipc_cost_model_test.cpp).
//
//   time = phases x phase + max over GPUs g of [ launches_g x launch
//                                                + max(hbm_g / hbm rate, link_in_g / link rate, link_out_g / link rate) ]
//
// phases: the call's cross-process handshakes (READY, DONE, two-shot's MID, the ring's 2P - 3
// between its steps, each with the left neighbour only, costed as a whole phase); each costs far
// more where ranks share a GPU without MPS (a handshake then waits for the GPU's time slice to
// pass to the peer's process) than where each rank has its own GPU. The bytes are counted from
// the kernels and copies the call runs (ipc_comm.cpp, allreduce_kernels.cu): every byte read or
// written lands in the memory (HBM) of the GPU that owns the buffer, and crosses that GPU's link
// (NVLink, PCIe) when the rank touching it runs on another GPU. Ranks sharing a GPU share its
// HBM: their kernels' bytes add up on it.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include "transports/cuda_ipc/ipc_algo.hpp"
#include "transports/cuda_ipc/limits.hpp"

namespace kolo::cuda_ipc {

// Which GPU each rank's buffers and streams are on, as every rank of the communicator agrees
// on it (IpcComm exchanges the devices' UUIDs when it is built). GPUs are numbered 0, 1, ... in
// the order of the lowest rank on each.
struct Placement {
  int world = 1;
  std::array<int, kMaxRanks> gpu_of{};

  static Placement one_gpu(int world);   // every rank on GPU 0
  static Placement own_gpus(int world);  // rank r on GPU r
  int gpus() const;
  bool shared() const;  // some GPU holds two ranks or more
};

// The model's parameters: KOLO_CUDA_IPC_MODEL and KOLO_CUDA_IPC_MODEL_ORDERING (common/config.cpp).
struct IpcModelParams {
  double phase_shared_us;    // one handshake phase, ranks sharing a GPU (events ordering)
  double phase_separate_us;  // one handshake phase, each rank on its own GPU (events ordering)
  double launch_us;          // one kernel or copy on a GPU
  double hbm_gbps;           // a GPU's memory: bytes read + written per second, in GB/s
  double link_gbps;          // a GPU's link to the others, each direction, in GB/s
  std::array<double, 3> ordering_extra_us;  // per phase over events: [events, flags, host]

  // Parses the two settings' text; a malformed one throws InvalidArgument naming the variable.
  static IpcModelParams parse(const std::string& model, const std::string& ordering);
  static IpcModelParams from_config();  // the settings from the environment, else the defaults
  static IpcModelParams defaults();     // the table's defaults, whatever the environment says
  double phase_us(bool shared, Ordering o) const;
};

// What one call moves, counted from the kernels and copies ipc_comm.cpp runs for `algo`
// (out of place; in place, one-shot first copies each input to a bounce buffer: see docs).
struct Traffic {
  int phases = 0;
  std::array<double, kMaxRanks> hbm{};       // bytes read + written in GPU g's memory
  std::array<double, kMaxRanks> link_in{};   // bytes into GPU g across its link
  std::array<double, kMaxRanks> link_out{};  // bytes out of GPU g across its link
  std::array<int, kMaxRanks> launches{};     // kernels and copies GPU g runs
  double total_hbm() const;
  int total_launches() const;
};
Traffic traffic(Algo algo, size_t bytes, const Placement& where);

// Predicted microseconds of one all-reduce of `bytes` per rank.
double predict_us(Algo algo, size_t bytes, const Placement& where, Ordering ordering, const IpcModelParams& m);

// The algorithm with the least predicted time (exact ties: the first in kAllAlgos). A function
// of its arguments alone, so every rank that agrees on them chooses the same.
Algo choose_algo(size_t bytes, const Placement& where, Ordering ordering, const IpcModelParams& m);

}  // namespace kolo::cuda_ipc

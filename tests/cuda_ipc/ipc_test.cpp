// kolo-ipc-test: the CUDA IPC all-reduce (transports/cuda_ipc) across real processes sharing
// one GPU. Launch it with kolorun (RANK, WORLD_SIZE, MASTER_ADDR/PORT); every rank uses device
// KOLO_IPC_DEVICE (default 0). KOLO_IPC_ORDERING=events (default), flags or host chooses how
// streams wait for peers (IpcComm::Options::Ordering): the bench's latency of each, and host,
// which has no GPU-side wait, tells a fault of the GPU ordering apart from one of the memory or
// the kernels (KOLO_IPC_HOST_ORDERED=1 is the old spelling of host).
//
//   kolorun -n 2 kolo-ipc-test [--bench]
//
// Checks: every element of one-shot, two-shot, two-shot-push, leader-push and ring all-reduce (float32, bfloat16)
// at counts 1, 7 and 1000003, the two-shots in place, the ring in place at counts 0 to 1000003
// (float16 too) and with the same bits on every rank, chains of calls with no host sync, and
// the registration cache (reuse, interior pointers, deregister, a freed and reallocated
// buffer); reduce-scatter, all-gather, broadcast, reduce, all-to-all, gather and scatter (every element, counts
// 0, 1, 7, 100003, both roots, in place where allowed, a chain of mixed kinds); the pair device
// (transports/cuda_ipc/ipc_pair_device.hpp) between these processes: messages around each ring
// at every size class, every pair at once in order, a tag mismatch reported with what arrived,
// the orderly close. --bench also measures, on rank 0's stream:
//   - a 256 MiB device-to-device cudaMemcpy (rank 0 alone; bytes read + written per second),
//   - the sum kernel alone over two local buffers (no IPC, no handshake),
//   - the five all-reduce algorithms, float32, at 8 B, 64 KiB, 16 MiB and 256 MiB, each line with
//     the cost model's prediction for it (predicted_us: transports/cuda_ipc/ipc_cost_model.hpp).
// HBM traffic of an all-reduce of S bytes over N ranks on ONE GPU (all ranks share its memory,
// so every rank's reads and writes count against the same HBM):
//   one-shot: each rank reads N inputs and writes its output:            N * (N + 1) * S
//   two-shot: reduce-scatter, each rank reads N slices of S/N, writes one: (N + 1) * S
//             all-gather, each rank reads and writes N-1 slices of S/N:    2 * (N - 1) * S
//             total                                                       (3N - 1) * S
//   two-shot-push: rank r reads slice r of N inputs (S) and writes it into N outputs (S): 2N * S
//   leader-push: rank 0 reads all N inputs and writes all N outputs (one kernel):         2N * S
//   ring: N - 1 reduce-scatter steps, each rank reads its chunk and its left neighbour's and
//         writes its own (3 S/N), then N - 1 all-gather copies (2 S/N):                 5 (N - 1) * S
// (2 ranks: one-shot 6 S, two-shot 5 S, two-shot-push 4 S; the copy moves 2 S.) The rate
// reported is that traffic divided by the time per call, and its ratio to the copy's rate is
// the 80 % target. The time per call is rank 0's: every call ends waiting for all
// ranks (ipc_comm.cpp, DONE), so back-to-back calls on one rank pace the whole job.
// Without a GPU it prints why it skips and exits 0.
//
// The parts, one file each: ipc_allreduce_checks.cpp, ipc_collective_checks.cpp,
// ipc_bounce_checks.cpp, ipc_bench.cpp, ipc_pair_checks.cpp (the pair device across processes);
// what they share is ipc_test_support.hpp.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include "ipc_test_support.hpp"
#include "kolo/process_group.hpp"
#include "kolo/store.hpp"

namespace ipc_test {
namespace {

int run(bool do_bench) {
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  if (probe != cudaSuccess || devices == 0) {
    std::printf("[  SKIPPED ] kolo-ipc-test: no CUDA device: %s\n",
                probe != cudaSuccess ? cudaGetErrorString(probe) : "cudaGetDeviceCount: 0 devices");
    return 0;
  }
  const kolo::LaunchEnv env = kolo::read_launch_env();
  g_rank = env.rank;
  g_world = env.world_size;
  const char* dev_env = std::getenv("KOLO_IPC_DEVICE");
  const char* host_env = std::getenv("KOLO_IPC_HOST_ORDERED");
  const char* ordering_env = std::getenv("KOLO_IPC_ORDERING");
  std::string ordering_name = ordering_env != nullptr ? ordering_env : "events";
  if (host_env != nullptr && std::strcmp(host_env, "1") == 0) ordering_name = "host";
  g_ordering = ordering_name;
  IpcComm::Options::Ordering ordering = IpcComm::Options::Ordering::events;
  if (ordering_name == "flags") {
    ordering = IpcComm::Options::Ordering::flags;
  } else if (ordering_name == "host") {
    ordering = IpcComm::Options::Ordering::host;
  } else if (ordering_name != "events") {
    std::fprintf(stderr, "kolo-ipc-test: KOLO_IPC_ORDERING=%s: expected events, flags or host\n", ordering_name.c_str());
    return 2;
  }
  const int device = dev_env != nullptr ? std::atoi(dev_env) : 0;
  check(cudaSetDevice(device), "cudaSetDevice");
  std::shared_ptr<kolo::Store> store;
  if (g_world == 1) {
    store = kolo::make_hash_store();
  } else {
    kolo::TCPStore::Options so;
    so.host = env.master_addr;
    so.port = env.master_port;
    so.is_server = g_rank == 0;
    so.timeout = std::chrono::seconds(30);
    if (const char* secret = std::getenv("KOLO_SECRET")) so.secret = secret;
    store = kolo::TCPStore::create(so);
  }
  if (g_rank == 0) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    // Compute mode 0 is shared; 3 (exclusive process) would refuse every rank but the first.
    int mode = -1;
    (void)cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device);
    std::printf("[==========] kolo-ipc-test: %d ranks on %s (compute mode %d), %s\n", g_world, prop.name, mode,
                ordering_name == "host"    ? "ordered on the host alone (no GPU-side waits)"
                : ordering_name == "flags" ? "ordered by flags in the shared segment (cuStreamWaitValue64)"
                                           : "ordered by IPC events");
    std::fflush(stdout);
  }
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  {
    IpcComm::Options opts;
    opts.prefix = "ipc-test";
    opts.timeout = std::chrono::seconds(30);
    opts.ordering = ordering;
    IpcComm comm(store, g_rank, g_world, opts);
    correctness(comm, s);
    collective_checks(comm, s);
    unexportable_memory_checks(comm, s);
    if (do_bench) run_case("IpcBench.all", [&] { bench(comm, *store, s); return std::string(); });
    cache_checks(comm, s);
    comm.close();
  }
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  pair_checks(store);
  // Rank 0 hosts the store: it leaves last, after every rank reported its count.
  store->set("result/" + std::to_string(g_rank), std::to_string(g_failures));
  int failed_ranks = 0;
  if (g_rank == 0) {
    for (int r = 0; r < g_world; ++r) failed_ranks += store->get_string("result/" + std::to_string(r)) != "0";
    if (failed_ranks == 0) {
      std::printf("[  PASSED  ] %d tests.\n", g_passed);
    } else {
      std::printf("[  FAILED  ] %d ranks failed\n", failed_ranks);
    }
  }
  return g_failures == 0 && failed_ranks == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ipc_test

int main(int argc, char** argv) {
  bool do_bench = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bench") == 0) {
      do_bench = true;
    } else {
      std::fprintf(stderr, "usage: kolo-ipc-test [--bench]   (launch with kolorun -n N)\n");
      return 2;
    }
  }
  try {
    return ipc_test::run(do_bench);
  } catch (const std::exception& e) {
    std::printf("[  FAILED  ] kolo-ipc-test rank %d: %s\n", ipc_test::g_rank, e.what());
    return 1;
  }
}

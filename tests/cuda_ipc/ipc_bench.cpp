// kolo-ipc-test --bench: the copy, the kernel alone, the parts of a small call and each
// all-reduce algorithm from 8 B to 256 MiB (ipc_test.cpp says what each line measures).
#include "ipc_test_support.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/ipc_cost_model.hpp"

namespace ipc_test {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per iteration of `body` on stream s: events around `iters` back-to-back calls,
// median of `reps` repetitions, each started in step with the peers by `align`.
double time_per_call(cudaStream_t s, int iters, int reps, const std::function<void()>& align,
                     const std::function<void()>& body, double* host_us = nullptr) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> gpu, host;
  for (int r = 0; r < reps; ++r) {
    align();
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaEventRecord(a, s), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) body();
    check(cudaEventRecord(b, s), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    const auto t1 = std::chrono::steady_clock::now();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    gpu.push_back(ms * 1e-3 / iters);
    host.push_back(std::chrono::duration<double>(t1 - t0).count() / iters);
  }
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  if (host_us != nullptr) *host_us = median(host) * 1e6;
  return median(gpu);
}

void bench(IpcComm& comm, kolo::Store& store, cudaStream_t s) {
  const size_t big = size_t{256} << 20;
  DeviceBuffer in(big), out(big);
  check(cudaMemset(in.ptr, 0, big), "cudaMemset");
  check(cudaMemset(out.ptr, 0, big), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  // Rank 0 measures the copy and the kernel alone while the others wait at the store.
  double copy_rate = 0;
  if (g_rank == 0) {
    const double t = time_per_call(s, 10, 7, [] {}, [&] {
      check(cudaMemcpyAsync(out.ptr, in.ptr, big, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    });
    copy_rate = 2.0 * big / t;
    std::printf("BENCH copy bytes=%zu time_us=%.1f rate_GBps=%.1f (read+written)\n", big, t * 1e6, copy_rate / 1e9);
    DeviceBuffer second(big);
    check(cudaMemset(second.ptr, 0, big), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (size_t bytes : {size_t{8}, big}) {
      const void* srcs[2] = {in.ptr, second.ptr};
      void* dsts[1] = {out.ptr};
      const double k = time_per_call(s, bytes == 8 ? 200 : 10, 7, [] {}, [&] {
        kolo::cuda_ipc::launch_sum(DataType::float32, dsts, 1, srcs, 2, 0, bytes / 4, s);
      });
      std::printf("BENCH kernel-alone sum of 2 local buffers bytes=%zu time_us=%.2f rate_GBps=%.1f ratio_to_copy=%.3f\n",
                  bytes, k * 1e6, 3.0 * bytes / k / 1e9, 3.0 * bytes / k / copy_rate);
    }
    std::fflush(stdout);
    store.set("bench/copy_done", std::string("1"));
  } else {
    store.get("bench/copy_done");
  }
  // Steps every rank to the same point: a one-element all-reduce and a synchronize.
  auto align = [&] {
    comm.all_reduce(in.ptr, out.ptr, 1, DataType::float32, Algo::kOneShot, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  };
  // The parts of a small call (issue 44: "report the parts"): the host handshakes alone (two
  // phases, no stream), a call that moves nothing (both handshakes and the GPU-side waits of
  // this ordering), against the kernel alone above and the 8 B all-reduces below.
  {
    align();
    const int rounds = 2000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < rounds; ++i) comm.host_barrier();
    const double host_handshake = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / rounds;
    double barrier_host_us = 0;
    const double barrier = time_per_call(s, 100, 7, align, [&] { comm.barrier(s); }, &barrier_host_us);
    if (g_rank == 0) {
      std::printf("BENCH parts ordering=%s ranks=%d host_handshake_us=%.2f barrier_gpu_us=%.2f barrier_host_us=%.2f\n",
                  g_ordering.c_str(), g_world, host_handshake * 1e6, barrier * 1e6, barrier_host_us);
      std::fflush(stdout);
    }
  }
  const double n = g_world;
  // The cost model's prediction of each line (ipc_cost_model.hpp, docs/COST_MODEL.md "CUDA IPC
  // (one node)"), with the inputs the engine's selection would give it: predicted_us beside
  // time_us is the model's check on every GPU run.
  const kolo::cuda_ipc::IpcModelParams model = kolo::cuda_ipc::IpcModelParams::from_config();
  if (g_rank == 0) {
    std::printf("BENCH model ranks=%d gpus=%d shared=%d ordering=%s phase_us=%.1f launch_us=%.2f hbm_GBps=%.0f "
                "link_GBps=%.0f\n",
                g_world, comm.placement().gpus(), comm.placement().shared() ? 1 : 0,
                kolo::cuda_ipc::ordering_name(comm.ordering()),
                model.phase_us(comm.placement().shared(), comm.ordering()), model.launch_us, model.hbm_gbps,
                model.link_gbps);
  }
  for (Algo algo : kolo::cuda_ipc::kAllAlgos) {
    for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{16} << 20, big}) {
      const int iters = bytes <= (size_t{64} << 10) ? 100 : bytes <= (size_t{16} << 20) ? 50 : 10;
      double host_us = 0;
      const double t = time_per_call(s, iters, 7, align, [&] {
        comm.all_reduce(in.ptr, out.ptr, bytes / 4, DataType::float32, algo, s);
      }, &host_us);
      const double predicted =
          kolo::cuda_ipc::predict_us(algo, bytes, comm.placement(), comm.ordering(), model);
      // push kinds: 2 N S; the ring 5 (N - 1) S (ipc_test.cpp)
      const double traffic = (algo == Algo::kOneShot   ? n * (n + 1)
                              : algo == Algo::kTwoShot ? 3 * n - 1
                              : algo == Algo::kRing    ? 5 * (n - 1)
                                                       : 2 * n) *
                             bytes;
      if (g_rank == 0) {
        std::printf("BENCH allreduce algo=%s ranks=%d bytes=%zu time_us=%.2f host_us_per_call=%.2f traffic_GBps=%.1f "
                    "ratio_to_copy=%.3f predicted_us=%.2f\n",
                    kolo::cuda_ipc::algo_name(algo), g_world, bytes, t * 1e6, host_us, traffic / t / 1e9,
                    traffic / t / copy_rate, predicted);
        if (bytes == big || bytes == 8) {
          std::printf("SUMMARY ipc allreduce %s ranks=%d bytes=%zu time_us=%.2f ratio_to_copy=%.3f predicted_us=%.2f "
                      "(target: 256 MiB >= 0.80, 8 B <= 30 us)\n",
                      kolo::cuda_ipc::algo_name(algo), g_world, bytes, t * 1e6, traffic / t / copy_rate, predicted);
        }
        std::fflush(stdout);
      }
    }
  }
  comm.deregister(in.ptr);
  comm.deregister(out.ptr);
}

}  // namespace ipc_test

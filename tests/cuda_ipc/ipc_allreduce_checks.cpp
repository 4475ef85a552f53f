// kolo-ipc-test, the all-reduce part: every algorithm, dtype and count, in place, chains of
// calls with no host sync, and the registration cache under IpcComm.
#include "ipc_test_support.hpp"

#include <cuda_runtime.h>

#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace ipc_test {

std::string all_reduce_case(IpcComm& comm, Algo algo, DataType t, size_t count, bool in_place, cudaStream_t s) {
  const size_t bytes = count * esize(t);
  DeviceBuffer in(bytes), out(bytes);
  upload_inputs(in.ptr, t, count, g_rank, s);
  check(cudaMemsetAsync(out.ptr, 0xff, bytes, s), "cudaMemsetAsync");  // NaN in both types: unwritten shows
  void* dst = in_place ? in.ptr : out.ptr;
  comm.all_reduce(in.ptr, dst, count, t, algo, s);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::string why = verify(dst, t, count);
  // The buffers are freed at the end of this case: evict them first (the explicit path).
  comm.deregister(in.ptr);
  comm.deregister(out.ptr);
  return why;
}

// The ordering across calls, with no host synchronization between them: every rank starts
// at 1.0 and feeds each result into the next call (one-shot: a -> b -> a ...; two-shot: in
// place), so after k calls every element is N^k exactly (k chosen so N^k < 2^24). A peer that
// read a buffer before it was ready, or after it was overwritten, leaves a wrong power.
std::string chained_case(IpcComm& comm, Algo algo, cudaStream_t s) {
  const size_t count = 1000003;
  DeviceBuffer a(count * 4), b(count * 4);
  const std::vector<float> ones(count, 1.0f);
  check(cudaMemcpyAsync(a.ptr, ones.data(), count * 4, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync H2D");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  int k = 0;
  double want = 1;
  while (want * g_world < double(1 << 24)) {
    want *= g_world;
    ++k;
  }
  if (g_world == 1) k = 8;
  void* cur = a.ptr;
  for (int i = 0; i < k; ++i) {
    if (algo != Algo::kOneShot) {
      comm.all_reduce(cur, cur, count, DataType::float32, algo, s);
    } else {
      void* next = cur == a.ptr ? b.ptr : a.ptr;
      comm.all_reduce(cur, next, count, DataType::float32, algo, s);
      cur = next;
    }
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::vector<float> host(count);
  check(cudaMemcpy(host.data(), cur, count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  comm.deregister(a.ptr);
  comm.deregister(b.ptr);
  for (size_t i = 0; i < count; ++i) {
    if (host[i] != static_cast<float>(want)) {
      return "after " + std::to_string(k) + " chained calls element " + std::to_string(i) + " is " +
             std::to_string(host[i]) + ", want " + std::to_string(want);
    }
  }
  return "";
}

// The ring sums each chunk in its own order (ipc_ring.cpp), rounding after every addition, and
// then copies the result to every rank: every rank must hold the same bits. Inputs that round
// (k / 3 + rank / 7, positive so that nothing cancels), the result all-gathered (IpcComm's own
// all-gather, checked elsewhere), every rank's copy compared bytewise with rank 0's, and each
// element within the rounding of P additions of the exact sum (not garbage that happens to agree).
std::string ring_same_bits_case(IpcComm& comm, DataType t, cudaStream_t s) {
  const size_t count = 100003, es = esize(t);
  std::vector<float> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = 0.5f + static_cast<float>(i % 97) / 3.0f / 97.0f + g_rank / 7.0f;
  std::vector<uint8_t> host(count * es);
  for (size_t i = 0; i < count; ++i) {
    if (t == DataType::float32) {
      std::memcpy(host.data() + i * 4, &mine[i], 4);
    } else {
      const __nv_bfloat16 b = __float2bfloat16(mine[i]);
      std::memcpy(host.data() + i * 2, &b, 2);
    }
  }
  DeviceBuffer in(count * es), out(count * es), all(count * es * g_world);
  upload(in.ptr, host, s);
  comm.all_reduce(in.ptr, out.ptr, count, t, Algo::kRing, s);
  comm.all_gather(out.ptr, all.ptr, count, t, s);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::vector<uint8_t> got(count * es * g_world);
  check(cudaMemcpy(got.data(), all.ptr, got.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  comm.deregister(in.ptr);
  comm.deregister(out.ptr);
  comm.deregister(all.ptr);
  const double tolerance = t == DataType::float32 ? 1e-5 : g_world * 0.0079;  // bfloat16: 2^-7 a rounding
  for (size_t i = 0; i < count; ++i) {
    for (int p = 1; p < g_world; ++p)
      if (std::memcmp(got.data() + (p * count + i) * es, got.data() + i * es, es) != 0)
        return "element " + std::to_string(i) + ": rank " + std::to_string(p) + " holds other bits than rank 0";
    double exact = 0;
    for (int p = 0; p < g_world; ++p) exact += 0.5 + static_cast<double>(i % 97) / 3.0 / 97.0 + p / 7.0;
    float v;
    if (t == DataType::float32) {
      std::memcpy(&v, got.data() + i * 4, 4);
    } else {
      __nv_bfloat16 b;
      std::memcpy(&b, got.data() + i * 2, 2);
      v = __bfloat162float(b);
    }
    if (!(std::abs(v - exact) <= tolerance * exact))
      return "element " + std::to_string(i) + " is " + std::to_string(v) + ", the exact sum " + std::to_string(exact);
  }
  return "";
}

void correctness(IpcComm& comm, cudaStream_t s) {
  for (Algo algo : kolo::cuda_ipc::kAllAlgos)
    for (DataType t : {DataType::float32, DataType::bfloat16})
      for (size_t count : {size_t{1}, size_t{7}, size_t{1000003}}) {
        const std::string name = std::string("IpcAllReduce.") + kolo::cuda_ipc::algo_name(algo) + "/" +
                                 (t == DataType::float32 ? "float32" : "bfloat16") + "/count" + std::to_string(count) +
                                 "/ranks" + std::to_string(g_world);
        run_case(name, [&] { return all_reduce_case(comm, algo, t, count, false, s); });
      }
  run_case("IpcAllReduce.two-shot/float32/count1000003/in_place/ranks" + std::to_string(g_world),
           [&] { return all_reduce_case(comm, Algo::kTwoShot, DataType::float32, 1000003, true, s); });
  run_case("IpcAllReduce.two-shot-push/bfloat16/count1000003/in_place/ranks" + std::to_string(g_world),
           [&] { return all_reduce_case(comm, Algo::kTwoShotPush, DataType::bfloat16, 1000003, true, s); });
  run_case("IpcAllReduce.leader-push/float32/count1000003/in_place/ranks" + std::to_string(g_world),
           [&] { return all_reduce_case(comm, Algo::kLeaderPush, DataType::float32, 1000003, true, s); });
  // The ring: in place at every dtype, counts around the world size (fewer elements than ranks
  // leave chunks empty) and 0, and the same bits on every rank (ring_same_bits_case).
  for (DataType t : {DataType::float32, DataType::bfloat16, DataType::float16})
    for (size_t count : {size_t{0}, size_t{2}, size_t{3}, size_t{5}, size_t{1000003}}) {
      const std::string name = std::string("IpcAllReduce.ring/") + type_name(t) + "/count" + std::to_string(count) +
                               "/in_place/ranks" + std::to_string(g_world);
      run_case(name, [&] { return all_reduce_case(comm, Algo::kRing, t, count, true, s); });
    }
  run_case("IpcAllReduce.ring/float16/count1000003/ranks" + std::to_string(g_world),
           [&] { return all_reduce_case(comm, Algo::kRing, DataType::float16, 1000003, false, s); });
  for (DataType t : {DataType::float32, DataType::bfloat16})
    run_case(std::string("IpcAllReduce.ring/same_bits/") + type_name(t) + "/ranks" + std::to_string(g_world),
             [&] { return ring_same_bits_case(comm, t, s); });
  for (Algo algo : kolo::cuda_ipc::kAllAlgos) {
    run_case(std::string("IpcAllReduce.chained/") + kolo::cuda_ipc::algo_name(algo) + "/ranks" + std::to_string(g_world),
             [&] { return chained_case(comm, algo, s); });
  }
}

void cache_checks(IpcComm& comm, cudaStream_t s) {
  const size_t count = 4099;  // odd, so the interior pointer below is misaligned for vectors
  run_case("IpcCache.reuse_and_interior_pointer", [&]() -> std::string {
    DeviceBuffer in(count * 4 + 64), out(count * 4 + 64);
    upload_inputs(in.ptr, DataType::float32, count, g_rank, s);
    const uint64_t before = comm.cache().exports();
    // Two-shot shares both buffers (one-shot shares only the input: peers never touch its output).
    for (int k = 0; k < 3; ++k) comm.all_reduce(in.ptr, out.ptr, count, DataType::float32, Algo::kTwoShot, s);
    if (comm.cache().exports() != before + 2) return "3 calls on 2 buffers exported " + std::to_string(comm.cache().exports() - before);
    // A pointer 4 bytes into the same allocations: no new export, and a right result.
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");  // the peers are done reading `in`
    upload_inputs(static_cast<char*>(in.ptr) + 4, DataType::float32, count, g_rank, s);
    comm.all_reduce(static_cast<char*>(in.ptr) + 4, static_cast<char*>(out.ptr) + 4, count, DataType::float32,
                    Algo::kTwoShot, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (comm.cache().exports() != before + 2) return "an interior pointer was exported again";
    std::string why = verify(static_cast<char*>(out.ptr) + 4, DataType::float32, count);
    if (!comm.deregister(in.ptr) || !comm.deregister(out.ptr)) return "deregister found nothing";
    if (comm.deregister(in.ptr)) return "deregister twice found something";
    return why;
  });
  run_case("IpcCache.freed_and_reallocated_without_deregister", [&]() -> std::string {
    // cudaFree + cudaMalloc of the same size usually returns the same address: the cache must
    // notice the new allocation (CUDA's BUFFER_ID differs) and export it again.
    auto in = std::make_unique<DeviceBuffer>(count * 4);
    DeviceBuffer out(count * 4);
    upload_inputs(in->ptr, DataType::float32, count, g_rank, s);
    comm.all_reduce(in->ptr, out.ptr, count, DataType::float32, Algo::kOneShot, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const uint64_t before = comm.cache().exports();
    in.reset();
    in = std::make_unique<DeviceBuffer>(count * 4);
    upload_inputs(in->ptr, DataType::float32, count, g_rank, s);
    check(cudaMemsetAsync(out.ptr, 0xff, count * 4, s), "cudaMemsetAsync");
    comm.all_reduce(in->ptr, out.ptr, count, DataType::float32, Algo::kOneShot, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (comm.cache().exports() != before + 1) return "the reallocated buffer was not exported again";
    std::string why = verify(out.ptr, DataType::float32, count);
    comm.deregister(in->ptr);
    comm.deregister(out.ptr);
    return why;
  });
}

}  // namespace ipc_test

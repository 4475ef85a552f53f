// kolo-ipc-test: the CUDA IPC all-reduce (transports/cuda_ipc) across real processes sharing
// one GPU. Launch it with kolorun (RANK, WORLD_SIZE, MASTER_ADDR/PORT); every rank uses device
// KOLO_IPC_DEVICE (default 0). KOLO_IPC_ORDERING=events (default), flags or host chooses how
// streams wait for peers (IpcComm::Options::Ordering): the bench's latency of each, and host,
// which has no GPU-side wait, tells a fault of the GPU ordering apart from one of the memory or
// the kernels (KOLO_IPC_HOST_ORDERED=1 is the old spelling of host).
//
//   kolorun -n 2 kolo-ipc-test [--bench]
//
// Checks: every element of one-shot, two-shot, two-shot-push and leader-push all-reduce (float32, bfloat16)
// at counts 1, 7 and 1000003, the two-shots in place, chains of calls with no host sync, and
// the registration cache (reuse, interior pointers, deregister, a freed and reallocated
// buffer); reduce-scatter, all-gather, broadcast, reduce, all-to-all, gather and scatter (every element, counts
// 0, 1, 7, 100003, both roots, in place where allowed, a chain of mixed kinds). --bench also measures, on rank 0's stream:
//   - a 256 MiB device-to-device cudaMemcpy (rank 0 alone; bytes read + written per second),
//   - the sum kernel alone over two local buffers (no IPC, no handshake),
//   - the three all-reduce algorithms, float32, at 8 B, 64 KiB, 16 MiB and 256 MiB.
// HBM traffic of an all-reduce of S bytes over N ranks on ONE GPU (all ranks share its memory,
// so every rank's reads and writes count against the same HBM):
//   one-shot: each rank reads N inputs and writes its output:            N * (N + 1) * S
//   two-shot: reduce-scatter, each rank reads N slices of S/N, writes one: (N + 1) * S
//             all-gather, each rank reads and writes N-1 slices of S/N:    2 * (N - 1) * S
//             total                                                       (3N - 1) * S
//   two-shot-push: rank r reads slice r of N inputs (S) and writes it into N outputs (S): 2N * S
//   leader-push: rank 0 reads all N inputs and writes all N outputs (one kernel):         2N * S
// (2 ranks: one-shot 6 S, two-shot 5 S, two-shot-push 4 S; the copy moves 2 S.) The rate
// reported is that traffic divided by the time per call, and its ratio to the copy's rate is
// the 80 % target. The time per call is rank 0's: every call ends waiting for all
// ranks (ipc_comm.cpp, DONE), so back-to-back calls on one rank pace the whole job.
// Without a GPU it prints why it skips and exits 0.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "kolo/process_group.hpp"
#include "kolo/store.hpp"
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"
#include "transports/cuda_ipc/ipc_comm.hpp"

namespace {

using kolo::DataType;
using kolo::cuda_ipc::Algo;
using kolo::cuda_ipc::check;
using kolo::cuda_ipc::IpcComm;

int g_rank = 0, g_world = 1, g_failures = 0, g_passed = 0;

// Small integers: exact in float32 and bfloat16, and so are their sums over up to 8 ranks, so
// every element is compared exactly.
float input_value(int rank, size_t i) { return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 31) - 15); }

float expected_sum(size_t i) {
  float s = 0;
  for (int r = 0; r < g_world; ++r) s += input_value(r, i);
  return s;
}

// Where the test's buffers come from: cudaMalloc (exported as they are), or memory that
// cudaIpcGetMemHandle refuses (managed; a stream-ordered pool's, as cudaMallocAsync and
// PyTorch's caching allocator in its async mode give), which the comm bounces through its own.
enum class Mem { device, managed, pool };
std::string g_ordering = "events";  // KOLO_IPC_ORDERING, named in the bench's lines
Mem g_mem = Mem::device;
const char* mem_name(Mem m) { return m == Mem::device ? "device" : m == Mem::managed ? "managed" : "pool"; }

struct DeviceBuffer {
  void* ptr = nullptr;
  Mem mem = g_mem;
  explicit DeviceBuffer(size_t bytes) {
    bytes = bytes < 16 ? 16 : bytes;
    if (mem == Mem::managed) {
      check(cudaMallocManaged(&ptr, bytes), "cudaMallocManaged");
    } else if (mem == Mem::pool) {
      check(cudaMallocAsync(&ptr, bytes, nullptr), "cudaMallocAsync");
      check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
    } else {
      check(cudaMalloc(&ptr, bytes), "cudaMalloc");
    }
  }
  ~DeviceBuffer() {
    if (ptr == nullptr) return;
    if (mem == Mem::pool) {
      (void)cudaDeviceSynchronize();  // the comm's stream may still use it
      (void)cudaFreeAsync(ptr, nullptr);
      (void)cudaStreamSynchronize(nullptr);
    } else {
      (void)cudaFree(ptr);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

size_t esize(DataType t) { return kolo::cuda_ipc::element_size(t); }

// On the test's stream, and waited for: the comm's stream is non-blocking, so a plain
// cudaMemcpy/cudaMemset (legacy default stream, and a pageable upload may return before its
// DMA is done) would not be ordered before the all-reduce that reads the buffer.
void upload_inputs(void* dev, DataType t, size_t count, int rank, cudaStream_t s) {
  std::vector<uint8_t> host(count * esize(t));
  for (size_t i = 0; i < count; ++i) {
    const float v = input_value(rank, i);
    if (t == DataType::float32) {
      std::memcpy(host.data() + i * 4, &v, 4);
    } else {
      const __nv_bfloat16 b = __float2bfloat16(v);
      std::memcpy(host.data() + i * 2, &b, 2);
    }
  }
  check(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync H2D");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

// The first wrong element, or "" when all are right.
std::string verify(const void* dev, DataType t, size_t count) {
  std::vector<uint8_t> host(count * esize(t));
  check(cudaMemcpy(host.data(), dev, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  for (size_t i = 0; i < count; ++i) {
    float got;
    if (t == DataType::float32) {
      std::memcpy(&got, host.data() + i * 4, 4);
    } else {
      __nv_bfloat16 b;
      std::memcpy(&b, host.data() + i * 2, 2);
      got = __bfloat162float(b);
    }
    if (got != expected_sum(i)) {
      return "element " + std::to_string(i) + " of " + std::to_string(count) + ": got " + std::to_string(got) +
             ", want " + std::to_string(expected_sum(i));
    }
  }
  return "";
}

// Runs one named check on every rank; a rank prints FAILED with its reason, rank 0 prints OK.
void run_case(const std::string& name, const std::function<std::string()>& body) {
  if (g_rank == 0) std::printf("[ RUN      ] %s\n", name.c_str());
  std::string why;
  try {
    why = body();
  } catch (const std::exception& e) {
    // An exception (a timeout, a CUDA error) leaves the ranks out of step: stop the run here
    // rather than let every later call wait out its timeout.
    std::printf("[  FAILED  ] %s (rank %d): exception: %s\n", name.c_str(), g_rank, e.what());
    std::fflush(stdout);
    throw;
  }
  if (why.empty()) {
    ++g_passed;
    if (g_rank == 0) std::printf("[       OK ] %s\n", name.c_str());
  } else {
    ++g_failures;
    std::printf("[  FAILED  ] %s (rank %d): %s\n", name.c_str(), g_rank, why.c_str());
  }
  std::fflush(stdout);
}

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

void correctness(IpcComm& comm, cudaStream_t s) {
  for (Algo algo : {Algo::kOneShot, Algo::kTwoShot, Algo::kTwoShotPush, Algo::kLeaderPush})
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
  for (Algo algo : {Algo::kOneShot, Algo::kTwoShot, Algo::kTwoShotPush, Algo::kLeaderPush}) {
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

// The other collectives (reduce-scatter, all-gather, broadcast, reduce, all-to-all): inputs from
// input_value(rank, i) in float32, bfloat16 or int64 (moves only), every element of every
// output compared exactly with a reference computed here.
std::vector<uint8_t> encode(DataType t, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * kolo::dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::float32) {
      std::memcpy(b.data() + i * 4, &v[i], 4);
    } else if (t == DataType::bfloat16) {
      const __nv_bfloat16 x = __float2bfloat16(v[i]);
      std::memcpy(b.data() + i * 2, &x, 2);
    } else {
      const int64_t x = static_cast<int64_t>(v[i]) * 1000003;  // high bytes in use too
      std::memcpy(b.data() + i * 8, &x, 8);
    }
  }
  return b;
}

std::string compare(DataType t, const void* dev, const std::vector<float>& want, const std::string& what) {
  const std::vector<uint8_t> w = encode(t, want);
  std::vector<uint8_t> got(w.size());
  check(cudaMemcpy(got.data(), dev, got.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  const size_t es = kolo::dtype_size(t);
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(got.data() + i * es, w.data() + i * es, es) != 0)
      return what + ": element " + std::to_string(i) + " of " + std::to_string(want.size()) + " is wrong (want " +
             std::to_string(want[i]) + ")";
  return "";
}

void upload(void* dev, const std::vector<uint8_t>& host, cudaStream_t s) {
  check(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync H2D");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

std::vector<float> values(int rank, size_t n, size_t first = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input_value(rank, first + i);
  return v;
}

const char* type_name(DataType t) { return kolo::dtype_name(t); }

std::string collective_case(IpcComm& comm, const std::string& kind, DataType t, size_t count, int root, bool in_place,
                            cudaStream_t s) {
  const size_t es = kolo::dtype_size(t), n = static_cast<size_t>(g_world);
  const size_t big = count * n;
  DeviceBuffer in(big * es), out(big * es);
  check(cudaMemsetAsync(out.ptr, 0xff, big * es, s), "cudaMemsetAsync");  // unwritten elements show
  std::string why;
  if (kind == "reduce_scatter") {
    // in: world * count, the element index running over the whole buffer.
    upload(in.ptr, encode(t, values(g_rank, big)), s);
    void* dst = in_place ? static_cast<char*>(in.ptr) + g_rank * count * es : out.ptr;
    comm.reduce_scatter(in.ptr, dst, count, t, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want(count, 0.0f);
    for (size_t i = 0; i < count; ++i) want[i] = expected_sum(g_rank * count + i);
    why = compare(t, dst, want, "reduce_scatter");
  } else if (kind == "all_gather") {
    void* src = in_place ? static_cast<char*>(out.ptr) + g_rank * count * es : in.ptr;
    upload(src, encode(t, values(g_rank, count)), s);
    comm.all_gather(src, out.ptr, count, t, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want;
    for (int p = 0; p < g_world; ++p) {
      const std::vector<float> v = values(p, count);
      want.insert(want.end(), v.begin(), v.end());
    }
    why = compare(t, out.ptr, want, "all_gather");
  } else if (kind == "broadcast") {
    upload(in.ptr, encode(t, values(g_rank == root ? root : 100 + g_rank, count)), s);
    comm.broadcast(in.ptr, count, t, root, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    why = compare(t, in.ptr, values(root, count), "broadcast");
  } else if (kind == "reduce") {
    upload(in.ptr, encode(t, values(g_rank, count)), s);
    void* dst = g_rank != root ? nullptr : in_place ? in.ptr : out.ptr;
    comm.reduce(in.ptr, dst, count, t, root, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = expected_sum(i);
    if (g_rank == root) why = compare(t, dst, want, "reduce at the root");
    // The input must be left as it was (a peer's kernel reads it; nobody writes it).
    if (why.empty() && !(in_place && g_rank == root)) why = compare(t, in.ptr, values(g_rank, count), "reduce's input");
  } else if (kind == "gather") {
    upload(in.ptr, encode(t, values(g_rank, count)), s);
    comm.gather(in.ptr, g_rank == root ? out.ptr : nullptr, count, t, root, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want;
    for (int p = 0; p < g_world; ++p) {
      const std::vector<float> v = values(p, count);
      want.insert(want.end(), v.begin(), v.end());
    }
    if (g_rank == root) why = compare(t, out.ptr, want, "gather at the root");
  } else if (kind == "scatter") {
    // The root's input: world * count, the element index running over the whole buffer.
    upload(in.ptr, encode(t, values(g_rank == root ? root : 100 + g_rank, big)), s);
    comm.scatter(g_rank == root ? in.ptr : nullptr, out.ptr, count, t, root, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    why = compare(t, out.ptr, values(root, count, g_rank * count), "scatter");
  } else {  // all_to_all: block p of rank r's input is r * 1000 + p-th window of the values
    upload(in.ptr, encode(t, values(g_rank, big)), s);
    void* dst = in_place ? in.ptr : out.ptr;
    comm.all_to_all(in.ptr, dst, count, t, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want;
    for (int p = 0; p < g_world; ++p) {
      const std::vector<float> v = values(p, count, g_rank * count);
      want.insert(want.end(), v.begin(), v.end());
    }
    why = compare(t, dst, want, "all_to_all");
  }
  comm.deregister(in.ptr);
  comm.deregister(out.ptr);
  return why;
}

// Reduce-scatter then all-gather, again and again, with no host synchronization: a two-shot
// all-reduce built from two kinds of call, so the ordering between calls of different kinds is
// checked (every element of a world-sized buffer of ones is world^k after k rounds).
std::string chained_kinds_case(IpcComm& comm, cudaStream_t s) {
  const size_t count = 250007, n = static_cast<size_t>(g_world);
  DeviceBuffer a(count * n * 4), b(count * 4);
  upload(a.ptr, encode(DataType::float32, std::vector<float>(count * n, 1.0f)), s);
  int k = 0;
  double want = 1;
  while (want * g_world < double(1 << 24) && k < 12) {
    want *= g_world;
    ++k;
  }
  for (int i = 0; i < k; ++i) {
    comm.reduce_scatter(a.ptr, b.ptr, count, DataType::float32, s);
    comm.all_gather(b.ptr, a.ptr, count, DataType::float32, s);
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::string why = compare(DataType::float32, a.ptr, std::vector<float>(count * n, static_cast<float>(want)),
                            "after " + std::to_string(k) + " reduce-scatter + all-gather rounds");
  comm.deregister(a.ptr);
  comm.deregister(b.ptr);
  return why;
}

void collective_checks(IpcComm& comm, cudaStream_t s) {
  const std::string ranks = "/ranks" + std::to_string(g_world);
  for (const char* kind : {"reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "gather", "scatter"}) {
    const bool sums = std::strcmp(kind, "reduce_scatter") == 0 || std::strcmp(kind, "reduce") == 0;
    const bool rooted = std::strcmp(kind, "broadcast") == 0 || std::strcmp(kind, "reduce") == 0 ||
                        std::strcmp(kind, "gather") == 0 || std::strcmp(kind, "scatter") == 0;
    std::vector<DataType> types = {DataType::float32, DataType::bfloat16};
    if (!sums) types.push_back(DataType::int64);
    for (DataType t : types)
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100003}})
        for (int root : rooted ? std::vector<int>{0, g_world - 1} : std::vector<int>{0}) {
          std::string name = std::string("IpcCollective.") + kind + "/" + type_name(t) + "/count" + std::to_string(count);
          if (rooted) name += "/root" + std::to_string(root);
          run_case(name + ranks, [&] { return collective_case(comm, kind, t, count, root, false, s); });
        }
  }
  run_case("IpcCollective.reduce_scatter/float32/count100003/in_place" + ranks,
           [&] { return collective_case(comm, "reduce_scatter", DataType::float32, 100003, 0, true, s); });
  run_case("IpcCollective.all_gather/bfloat16/count100003/in_place" + ranks,
           [&] { return collective_case(comm, "all_gather", DataType::bfloat16, 100003, 0, true, s); });
  run_case("IpcCollective.chained_reduce_scatter_all_gather" + ranks, [&] { return chained_kinds_case(comm, s); });
  // In place through the bounce buffer, and in place on some ranks only (the engine takes the
  // same path on every rank whatever each one's buffers: device_direct.cpp).
  run_case("IpcCollective.reduce/float32/count100003/in_place_at_root" + ranks,
           [&] { return collective_case(comm, "reduce", DataType::float32, 100003, g_world - 1, true, s); });
  run_case("IpcCollective.all_to_all/bfloat16/count100003/in_place" + ranks,
           [&] { return collective_case(comm, "all_to_all", DataType::bfloat16, 100003, 0, true, s); });
  run_case("IpcCollective.all_to_all/float32/count7/in_place_on_even_ranks" + ranks,
           [&] { return collective_case(comm, "all_to_all", DataType::float32, 7, 0, g_rank % 2 == 0, s); });
  run_case("IpcAllReduce.one-shot/float32/count100003/in_place" + ranks,
           [&] { return all_reduce_case(comm, Algo::kOneShot, DataType::float32, 100003, true, s); });
  run_case("IpcAllReduce.one-shot/bfloat16/count7/in_place_on_even_ranks" + ranks,
           [&] { return all_reduce_case(comm, Algo::kOneShot, DataType::bfloat16, 7, g_rank % 2 == 0, s); });
}

// Every collective on memory that cannot be exported (managed, pool): the bounce path, with
// the choice of algorithm and the results the same as on cudaMalloc memory.
void unexportable_memory_checks(IpcComm& comm, cudaStream_t s) {
  const std::string ranks = "/ranks" + std::to_string(g_world);
  for (Mem mem : {Mem::managed, Mem::pool}) {
    g_mem = mem;
    const std::string m = std::string("/") + mem_name(mem);
    for (Algo algo : {Algo::kOneShot, Algo::kTwoShot, Algo::kTwoShotPush, Algo::kLeaderPush}) {
      run_case(std::string("IpcBounce.all_reduce/") + kolo::cuda_ipc::algo_name(algo) + m + ranks,
               [&] { return all_reduce_case(comm, algo, DataType::float32, 100003, false, s); });
      if (algo != Algo::kOneShot)
        run_case(std::string("IpcBounce.all_reduce/") + kolo::cuda_ipc::algo_name(algo) + "/in_place" + m + ranks,
                 [&] { return all_reduce_case(comm, algo, DataType::bfloat16, 100003, true, s); });
    }
    for (const char* kind : {"reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "gather", "scatter"})
      run_case(std::string("IpcBounce.") + kind + m + ranks,
               [&] { return collective_case(comm, kind, DataType::float32, 100003, g_world - 1, false, s); });
    run_case("IpcBounce.chained/two-shot-push" + m + ranks, [&] { return chained_case(comm, Algo::kTwoShotPush, s); });
  }
  g_mem = Mem::device;
}

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
  for (Algo algo : {Algo::kOneShot, Algo::kTwoShot, Algo::kTwoShotPush, Algo::kLeaderPush}) {
    for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{16} << 20, big}) {
      const int iters = bytes <= (size_t{64} << 10) ? 100 : bytes <= (size_t{16} << 20) ? 50 : 10;
      double host_us = 0;
      const double t = time_per_call(s, iters, 7, align, [&] {
        comm.all_reduce(in.ptr, out.ptr, bytes / 4, DataType::float32, algo, s);
      }, &host_us);
      const double traffic = (algo == Algo::kOneShot ? n * (n + 1) : algo == Algo::kTwoShot ? 3 * n - 1 : 2 * n) * bytes;  // push kinds: 2 N S
      if (g_rank == 0) {
        std::printf("BENCH allreduce algo=%s ranks=%d bytes=%zu time_us=%.2f host_us_per_call=%.2f traffic_GBps=%.1f "
                    "ratio_to_copy=%.3f\n",
                    kolo::cuda_ipc::algo_name(algo), g_world, bytes, t * 1e6, host_us, traffic / t / 1e9,
                    traffic / t / copy_rate);
        if (bytes == big || bytes == 8) {
          std::printf("SUMMARY ipc allreduce %s ranks=%d bytes=%zu time_us=%.2f ratio_to_copy=%.3f (target: 256 MiB >= 0.80, "
                      "8 B <= 30 us)\n",
                      kolo::cuda_ipc::algo_name(algo), g_world, bytes, t * 1e6, traffic / t / copy_rate);
        }
        std::fflush(stdout);
      }
    }
  }
  comm.deregister(in.ptr);
  comm.deregister(out.ptr);
}

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
    return run(do_bench);
  } catch (const std::exception& e) {
    std::printf("[  FAILED  ] kolo-ipc-test rank %d: %s\n", g_rank, e.what());
    return 1;
  }
}

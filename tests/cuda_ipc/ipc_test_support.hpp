// What the parts of kolo-ipc-test share (ipc_test.cpp says what the program checks and how it
// is launched): the rank's place in the job and its counts, the inputs every check computes
// its reference from, device buffers of each kind of memory, and running one named check on
// every rank with GoogleTest-like lines (scripts/env/device-check.d/ipc.sh counts them).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include "kolo/store.hpp"
#include "kolo/types.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"
#include "transports/cuda_ipc/ipc_comm.hpp"

namespace ipc_test {

using kolo::DataType;
using kolo::cuda_ipc::Algo;
using kolo::cuda_ipc::check;
using kolo::cuda_ipc::IpcComm;

extern int g_rank, g_world, g_failures, g_passed;
extern std::string g_ordering;  // KOLO_IPC_ORDERING, named in the bench's lines

// Small integers: exact in float32, float16 and bfloat16 (upload_inputs and verify take all
// three), and so are their sums over up to 8 ranks in any order, so every element is compared
// exactly.
float input_value(int rank, size_t i);
float expected_sum(size_t i);

// Where the test's buffers come from: cudaMalloc (exported as they are), or memory that
// cudaIpcGetMemHandle refuses (managed; a stream-ordered pool's, as cudaMallocAsync and
// PyTorch's caching allocator in its async mode give), which the comm bounces through its own.
enum class Mem { device, managed, pool };
extern Mem g_mem;  // what DeviceBuffer allocates
const char* mem_name(Mem m);

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

size_t esize(DataType t);
// input_value(rank, i) into dev, on s, and waited for.
void upload_inputs(void* dev, DataType t, size_t count, int rank, cudaStream_t s);
// The first element of dev that is not expected_sum(i), or "" when all are right.
std::string verify(const void* dev, DataType t, size_t count);
// Runs one named check on every rank; a rank prints FAILED with its reason, rank 0 prints OK.
void run_case(const std::string& name, const std::function<std::string()>& body);

// For the other collectives: v in dtype t's bytes (int64: scaled so the high bytes are in use),
// the first element of dev that differs from want, a blocking upload on s, and the inputs of
// `rank` from element `first` on.
std::vector<uint8_t> encode(DataType t, const std::vector<float>& v);
std::string compare(DataType t, const void* dev, const std::vector<float>& want, const std::string& what);
void upload(void* dev, const std::vector<uint8_t>& host, cudaStream_t s);
std::vector<float> values(int rank, size_t n, size_t first = 0);
const char* type_name(DataType t);

// One case each, on every rank ("" when right), for the parts that reuse them.
std::string all_reduce_case(IpcComm& comm, Algo algo, DataType t, size_t count, bool in_place, cudaStream_t s);
std::string chained_case(IpcComm& comm, Algo algo, cudaStream_t s);
std::string collective_case(IpcComm& comm, const std::string& kind, DataType t, size_t count, int root, bool in_place,
                            cudaStream_t s);

// The parts, in the order run() calls them.
void correctness(IpcComm& comm, cudaStream_t s);                 // ipc_allreduce_checks.cpp
void collective_checks(IpcComm& comm, cudaStream_t s);           // ipc_collective_checks.cpp
void unexportable_memory_checks(IpcComm& comm, cudaStream_t s);  // ipc_bounce_checks.cpp
void bench(IpcComm& comm, kolo::Store& store, cudaStream_t s);   // ipc_bench.cpp
void cache_checks(IpcComm& comm, cudaStream_t s);                // ipc_allreduce_checks.cpp
void pair_checks(const std::shared_ptr<kolo::Store>& store);     // ipc_pair_checks.cpp

}  // namespace ipc_test
